// Package blob keeps the files of jobs' artifacts: on the server's file
// system (FS, the default) or in an S3-compatible object store (S3). Keys
// are slash paths; Key builds the one of an artifact file.
//
// Who may import it: reconciler, web and cmd. It imports nothing of
// hoist's; it is beside store, not part of it, and speaks no SQL.
package blob
