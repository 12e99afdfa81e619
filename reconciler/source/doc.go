// Package source gives hoist the revisions of the spec repository: which
// revision is the latest on the tracked branch, an immutable in-memory file
// tree for any revision, and a nudge whenever something may have changed.
//
// Three kinds of source sit behind one interface, picked by [Open] from
// Config.Repo:
//
//   - a local Git repository (go-git reads the object store directly; the
//     .git refs are watched with fsnotify and polled as a safety net);
//   - a remote Git URL (file://, http(s)://, ssh:// or scp-like), checked
//     with a cheap ref listing and fetched (depth 1) only when the ref moved,
//     the Flux way: never a long-lived shallow work tree that is pulled into;
//   - a plain directory that is not a Git repository (dev mode): watched with
//     fsnotify, every change a revision named by a content hash.
//
// Every snapshot is an immutable in-memory copy of the regular files under
// Config.Path (symbolic links to files are followed in dev mode; Git
// symbolic links and submodules are skipped), so readers never race with
// commits, repacks or editors. Consecutive Git snapshots share unchanged
// directories, so a one-file commit reads one file.
//
// file:// URLs run the git CLI's git-upload-pack, as go-git does; the
// other kinds need no git binary.
//
// Consumers loop on Changes: each nudge is a hint (debounced file system
// events, poll ticks, Trigger) to call Latest, compare the ID with the one
// applied, and Checkout only when it moved. See the package example.
//
// Remote credentials come from user-info in the URL, else from
// Config.Credentials, else from HOIST_GIT_USERNAME / HOIST_GIT_PASSWORD
// (or HOIST_GIT_TOKEN), HOIST_GIT_SSH_KEY, HOIST_GIT_SSH_KEY_PASSPHRASE,
// HOIST_GIT_KNOWN_HOSTS and HOIST_GIT_CA_FILE. SSH host keys are always
// verified; secrets are never logged or put in errors.
//
// Mirrors serves another purpose: it keeps bare mirrors of the remote
// repositories runs bring with `repos[].url`, fetched with the same auth
// code from credentials given by value (the project's secrets) and never
// from the environment, and reads the tree of one commit of them.
//
// The package is imported by the reconciler's revision pipeline and by
// cmd/hoist, which builds the Config from flags. It does no validation of
// spec content and knows nothing about runs; it only reads files.
package source
