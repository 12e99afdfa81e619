package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"hoist/agents/api"
	"hoist/reconciler/source"
	"hoist/schema"
)

// Project secrets that authenticate `repos[].url` fetches. <HOST> is the
// URL's host name upper-cased with every other character than a letter or
// digit replaced by "_" (git.example.com: GIT_EXAMPLE_COM); the
// host-specific secret wins over the general one.
const (
	secretGitToken      = "HOIST_GIT_TOKEN"
	secretGitUsername   = "HOIST_GIT_USERNAME"
	secretGitSSHKey     = "HOIST_GIT_SSH_KEY"
	secretGitKnownHosts = "HOIST_GIT_KNOWN_HOSTS"
)

// defaultGitUsername goes with a token when HOIST_GIT_USERNAME is not set:
// dstack's runner sends "anything" (dstack:
// runner/internal/runner/repo/manager.go, WithTokenAuth), and GitHub,
// GitLab and Bitbucket take a token as the password whatever the name.
const defaultGitUsername = "anything"

// gitSecrets names the secrets a remote URL's fetch reads: the token or
// key secrets, host-specific first, and whether the URL is SSH.
func gitSecrets(rawURL string) (names []string, ssh bool, err error) {
	ep, err := transport.NewEndpoint(rawURL)
	if err != nil {
		return nil, false, fmt.Errorf("not a git url: %w", err)
	}
	host := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, ep.Host)
	switch ep.Protocol {
	case "ssh":
		return []string{secretGitSSHKey + "_" + host, secretGitSSHKey}, true, nil
	case "http", "https":
		return []string{secretGitToken + "_" + host, secretGitToken}, false, nil
	case "git":
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("%s urls are not fetched (https, http, ssh or git)", ep.Protocol)
}

// optional returns the first of names the project has as a secret, or ""
// when it has none of them.
func (r *secretResolver) optional(names ...string) (name string, value []byte, err error) {
	for _, n := range names {
		v, err := r.get(n, "")
		var miss *missingSecretError
		if errors.As(err, &miss) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		return n, v, nil
	}
	return "", nil, nil
}

// fetchMirror fetches rawURL at ref into its mirror with the project's
// Git secrets (gitSecrets) and returns the commit's tree; an
// authentication failure's error says which secret was used or which one
// to set.
func (c *Controller) fetchMirror(ctx context.Context, rawURL string, ref source.MirrorRef) (*source.Tree, error) {
	names, ssh, err := gitSecrets(rawURL)
	if err != nil {
		return nil, err
	}
	sec := c.secrets(ctx)
	var creds source.Credentials
	used := "no secret"
	if ssh {
		name, key, err := sec.optional(names...)
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("an ssh url needs a private key: set the project secret %s or %s", names[0], names[1])
		}
		_, kh, err := sec.optional(secretGitKnownHosts)
		if err != nil {
			return nil, err
		}
		if len(kh) == 0 {
			return nil, fmt.Errorf("an ssh url needs the server's host keys: set the project secret %s (known_hosts lines)", secretGitKnownHosts)
		}
		creds.SSHKey, creds.KnownHosts, used = string(key), string(kh), "secret "+name
	} else if len(names) > 0 {
		name, tok, err := sec.optional(names...)
		if err != nil {
			return nil, err
		}
		if name != "" {
			_, user, err := sec.optional(secretGitUsername)
			if err != nil {
				return nil, err
			}
			creds.Username, creds.Password, used = string(user), string(tok), "secret "+name
			if creds.Username == "" {
				creds.Username = defaultGitUsername
			}
		}
	}
	tree, err := c.mirrors.Fetch(ctx, rawURL, creds, ref)
	if err != nil {
		if isAuthError(err) {
			hint := "set the project secret " + strings.Join(names, " or ")
			if used != "no secret" {
				hint = "with " + used
			}
			return nil, fmt.Errorf("%w (%s)", err, hint)
		}
		return nil, err
	}
	return tree, nil
}

// isAuthError reports whether a fetch failed for want of (valid)
// credentials.
func isAuthError(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)
}

// repoFromURL adds a `repos` entry with a `url` to j under the repository
// prefix. The server fetches it, not the job: hoist's job containers run
// on Docker bridge networks and instances behind tunnels, and the
// credentials (project secrets, never the spec file) must not reach the
// instance. It is fetched with go-git into a mirror under the server's
// data directory (only new objects on later runs) with the same auth code
// as the spec repository, at `hash`, else the tip of `branch`, else the
// remote's default branch, and its tree travels as local code does (the
// run gets the files, without a .git directory).
func (c *Controller) repoFromURL(ctx context.Context, j *jobCode, r schema.Repo) error {
	tree, err := c.fetchMirror(ctx, r.URL, source.MirrorRef{Branch: r.Branch, Hash: r.Hash})
	if err != nil {
		return err
	}
	j.closers = append(j.closers, tree.Close)
	j.addDir(api.CodeRepoPrefix)
	return tree.Walk(func(e source.TreeEntry) error {
		p := api.CodeRepoPrefix + "/" + e.Path
		if e.Dir {
			j.addDir(p)
			return nil
		}
		sum, err := c.blobSums.sum(e.Blob, func() (io.ReadCloser, error) { return tree.Open(e.Blob) })
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		blob := e.Blob
		return j.addFile(p, e.Executable, e.Size, sum, func() (io.ReadCloser, error) { return tree.Open(blob) })
	})
}

// maxBlobSums bounds blobSums; past it the map starts over.
const maxBlobSums = 1 << 20

// blobSums remembers the SHA-256 of files by an id naming their content
// (a Git blob's id; a kept artifact's key, size and time), so that a
// mirrored repository's files and kept artifacts are read once for their
// hash, not on every run.
type blobSums struct {
	mu   sync.Mutex
	sums map[string]string
}

// sum returns the SHA-256 of the blob with Git id, reading it through open
// the first time.
func (b *blobSums) sum(id string, open func() (io.ReadCloser, error)) (string, error) {
	b.mu.Lock()
	s, ok := b.sums[id]
	b.mu.Unlock()
	if ok {
		return s, nil
	}
	rc, err := open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return "", err
	}
	s = hex.EncodeToString(h.Sum(nil))
	b.mu.Lock()
	if len(b.sums) >= maxBlobSums {
		b.sums = map[string]string{}
	}
	b.sums[id] = s
	b.mu.Unlock()
	return s, nil
}
