package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"hoist/agents/api"
)

// deniedMountDirs are host directories the shim never bind-mounts, nor
// anything below them, whatever the server asks: the server's policy
// refuses them first, and this is the same rule once more on the host
// itself (symbolic links resolved here, where they point).
var deniedMountDirs = []string{"/etc", "/root", "/proc", "/sys", "/dev", "/boot", "/var/run/docker.sock", "/run/docker.sock"}

// deniedMount returns why the shim refuses one of spec's instance mounts:
// a path equal to, below or containing a denied directory, the Docker
// socket the shim's client speaks to (and those DOCKER_HOST and
// Config.DockerHost name), the shim's state directory (the runner homes) or
// the runner binary. `/` contains them all.
func (s *Shim) deniedMount(spec api.TaskSpec) error {
	deny := append([]string{s.cfg.StateDir, s.cfg.RunnerBinary}, deniedMountDirs...)
	for _, h := range []string{os.Getenv("DOCKER_HOST"), s.cfg.DockerHost, s.docker.DaemonHost()} {
		if p, ok := strings.CutPrefix(h, "unix://"); ok && p != "" {
			deny = append(deny, p)
		}
	}
	for _, d := range deny {
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
			deny = append(deny, r)
		}
	}
	for _, m := range spec.InstanceMounts {
		p, err := resolveHostPath(m.InstancePath)
		if err != nil {
			return fmt.Errorf("instance mount %s: %w", m.InstancePath, err)
		}
		for _, d := range deny {
			d = filepath.Clean(d)
			if under(p, d) || under(d, p) {
				return fmt.Errorf("instance mount %s: the shim never mounts %s (it is or holds %s)", m.InstancePath, p, d)
			}
		}
	}
	return nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// resolveHostPath resolves the symbolic links of an absolute host path,
// through its longest existing ancestor when it does not exist yet (Docker
// creates it); a link that does not resolve is an error.
func resolveHostPath(path string) (string, error) {
	if !filepath.IsAbs(path) || strings.Contains("/"+path+"/", "/../") {
		return "", errors.New("must be absolute without ..")
	}
	cur, rest := filepath.Clean(path), ""
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if _, lerr := os.Lstat(cur); lerr == nil || !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve: %w", err)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", fmt.Errorf("resolve: %w", err)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
