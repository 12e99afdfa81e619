package api

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"strings"
)

// A job's artifacts are folders and files it produces that the server keeps
// when the job ends, like the `artifacts` of dstack 0.x's workflows
// (dstack: docs/workflows.md, "artifacts: - checkpoint"; saved at the end
// of the workflow). The server asks GET ArtifactsPath?path=P&path=Q...
// once the job's commands have ended (the runner answers while the job
// runs too) and the runner streams an uncompressed tar (archive/tar) of
// those paths:
//
//   - A relative path is taken relative to the job's working directory
//     (JobSpec.WorkingDir as the runner resolved it; RunResponse.WorkingDir)
//     and its entries are named by their slash path relative to that
//     directory ("out/model.bin"). A relative path that leaves the working
//     directory through ".." is refused with 400.
//   - An absolute path is taken as is, as dstack 0.x did, and its entries
//     are named by their slash path relative to "/", without the leading
//     slash ("/data/out/x" is "data/out/x").
//   - Directories are walked recursively, each one an entry of its own
//     (TypeDir, named with a trailing slash), so that an empty directory is
//     kept. Regular files are entries of TypeReg with their permission
//     bits and modification time.
//   - Symlinks are never followed: a symlink inside a walked directory is
//     skipped, and a path asked for that is a symlink or is reached
//     through one is skipped and reported missing. Sockets, devices and
//     pipes are treated alike.
//   - Every entry appears once, in the order of the paths asked for, each
//     directory's contents in lexical order.
//
// The runner reads with its own permissions, which are the job's user's: a
// job running as a non-root user gets what that user may read.
//
// The answer's ArtifactsMissingHeader names what could not be archived;
// see there. An error after the archive has begun cuts the connection, so
// that the reader sees a truncated tar (io.ErrUnexpectedEOF), never a
// complete-looking one.
const (
	// ArtifactsPath streams a job's artifacts as a tar.
	ArtifactsPath = "/api/v1/artifacts"
	// ArtifactsContentType is the media type of the artifacts' tar.
	ArtifactsContentType = "application/x-tar"
	// ArtifactsMissingHeader lists, comma-separated, each item escaped
	// with url.PathEscape, in the order met, what the runner could not
	// archive: each path asked for that does not exist, is a symlink or
	// is reached through one, is neither a regular file nor a directory,
	// or that the runner may not read, as it was asked for; and each
	// entry inside a walked directory that the runner may not read (or
	// list and enter), named like the tar's entries. Absent when nothing
	// is missing. When the list would exceed MaxArtifactsMissingBytes, it
	// ends with an item "... and N more".
	ArtifactsMissingHeader = "Hoist-Artifacts-Missing"
	// MaxArtifactsMissingBytes bounds the value of ArtifactsMissingHeader.
	MaxArtifactsMissingBytes = 32 << 10
)

// FormatArtifactsMissing returns the value of ArtifactsMissingHeader for
// missing, at most MaxArtifactsMissingBytes long ("" for none).
func FormatArtifactsMissing(missing []string) string {
	var b strings.Builder
	for i, m := range missing {
		item := url.PathEscape(m)
		if b.Len()+len(item)+1 > MaxArtifactsMissingBytes-64 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(url.PathEscape(fmt.Sprintf("... and %d more", len(missing)-i)))
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	return b.String()
}

// parseArtifactsMissing reads the value of ArtifactsMissingHeader; an item
// that does not unescape is kept as it is.
func parseArtifactsMissing(v string) []string {
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i, it := range items {
		if u, err := url.PathUnescape(it); err == nil {
			items[i] = u
		}
	}
	return items
}

// ErrBadArtifact is wrapped by EachArtifact's errors for an entry that a
// runner does not send: a name that is not a clean relative slash path, or
// a type other than a regular file or a directory.
var ErrBadArtifact = errors.New("bad artifact entry")

// EachArtifact reads an artifacts tar (see ArtifactsPath) and calls fn for
// every regular file, in the archive's order, with its name (a clean
// relative slash path), size, permission bits and content; body is valid
// only during the call, and what fn leaves unread is skipped. Directory
// entries are checked and passed over. It refuses, with an error wrapping
// ErrBadArtifact and naming the entry, a name that is absolute, holds a
// ".." element, a backslash or a NUL, or is not clean, and any entry that
// is neither a regular file nor a directory. It returns fn's error as it
// is, and an error wrapping io.ErrUnexpectedEOF for a truncated archive.
func EachArtifact(r io.Reader, fn func(name string, size int64, mode fs.FileMode, body io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("artifacts: read tar: %w", err)
		}
		name := h.Name
		switch h.Typeflag {
		case tar.TypeDir:
			name = strings.TrimSuffix(name, "/")
		case tar.TypeReg:
		default:
			return fmt.Errorf("artifacts: entry %q: type %q is neither a regular file nor a directory: %w", h.Name, h.Typeflag, ErrBadArtifact)
		}
		if err := checkArtifactName(name); err != nil {
			return fmt.Errorf("artifacts: entry %q: %w: %w", h.Name, err, ErrBadArtifact)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Size < 0 {
			return fmt.Errorf("artifacts: entry %q: negative size: %w", h.Name, ErrBadArtifact)
		}
		if err := fn(name, h.Size, fs.FileMode(h.Mode)&fs.ModePerm, tr); err != nil {
			return err
		}
	}
}

// checkArtifactName refuses a name that is not a clean relative slash path.
func checkArtifactName(name string) error {
	switch {
	case name == "" || name == ".":
		return errors.New("empty name")
	case path.IsAbs(name):
		return errors.New("absolute name")
	case strings.ContainsAny(name, "\\\x00"):
		return errors.New("name holds a backslash or a NUL")
	case name == ".." || strings.HasPrefix(name, "../") || strings.HasSuffix(name, "/..") || strings.Contains(name, "/../"):
		return errors.New("name leaves its root through ..")
	case path.Clean(name) != name:
		return errors.New("name is not a clean path")
	}
	return nil
}
