package sshfleet

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"hoist/backends"
)

// probeScript prints key=value facts about a host that decide whether and
// which agents can run there, and the agents already in dir, a shell
// expression for the instance directory (it may use $HOME); it needs only a
// POSIX shell and coreutils. The host's resources are not among them: the
// shim, once running, describes its host (agents/hostinfo).
func probeScript(dir string) string {
	return `D=` + dir + `
echo "os=$(uname -s)"
echo "arch=$(uname -m)"
echo "home=$HOME"
echo "dir=$D"
echo "tar=$(command -v tar)"
for f in hoist-runner hoist-shim; do echo "sum:$f=$(sha256sum "$D/bin/$f" 2>/dev/null | cut -d' ' -f1)"; done
if v=$(docker version --format '{{.Server.Version}}' 2>&1); then echo "docker=$v"; else echo "docker_error=$(echo "$v" | tr '\n' ' ')"; fi
`
}

// hostFacts is what probeScript found.
type hostFacts struct {
	OS, Arch, Home, Dir, Docker, DockerError, Tar string
	// Sums are the SHA-256 of the agents already in Dir/bin, by name.
	Sums map[string]string
}

func parseFacts(out []byte) hostFacts {
	f := hostFacts{Sums: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "os":
			f.OS = v
		case "arch":
			f.Arch = v
		case "home":
			f.Home = v
		case "dir":
			f.Dir = v
		case "tar":
			f.Tar = v
		case "docker":
			f.Docker = v
		case "docker_error":
			f.DockerError = v
		case "sum:hoist-runner", "sum:hoist-shim":
			if v != "" {
				f.Sums[strings.TrimPrefix(k, "sum:")] = v
			}
		}
	}
	return f
}

// goArch maps uname -m to Go's architecture names; "" when unsupported.
func goArch(machine string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8l":
		return "arm64"
	}
	return ""
}

// check refuses hosts hoist cannot run on, as stalled errors: they need the
// user to fix the host.
func (f hostFacts) check() error {
	switch {
	case f.OS != "Linux":
		return backends.Stalled(fmt.Errorf("%w: os %q, want Linux", backends.ErrUnsupportedHost, f.OS))
	case goArch(f.Arch) == "":
		return backends.Stalled(fmt.Errorf("%w: architecture %q, want x86_64 or aarch64", backends.ErrUnsupportedHost, f.Arch))
	case f.Docker == "":
		return backends.Stalled(fmt.Errorf("%w: docker engine not usable: %s", backends.ErrUnsupportedHost, f.DockerError))
	case f.Home == "" || f.Dir == "":
		return backends.Stalled(fmt.Errorf("%w: login user has no $HOME", backends.ErrUnsupportedHost))
	case f.Tar == "":
		return backends.Stalled(fmt.Errorf("%w: tar not found", backends.ErrUnsupportedHost))
	}
	return nil
}

// supervisorScript keeps the shim running in dir and survives the SSH
// connection that started it (it runs under setsid). Touching dir/stop and
// sending SIGTERM stops it and the shim. Each run of the shim logs to
// shim.cur.log (appended to shim.log when it ends) and writes the address it
// listens on to shim.addr.
func supervisorScript(shimArgs string) string {
	return `#!/bin/sh
# hoist shim supervisor, written by hoist (backends/sshfleet). Keeps
# bin/hoist-shim running; "touch stop" and SIGTERM end it.
DIR=$(cd "$(dirname "$0")" && pwd) || exit 1
cd "$DIR" || exit 1
echo $$ > supervisor.pid
child=
stop() {
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
  rm -f supervisor.pid shim.pid shim.addr
  exit 0
}
trap stop TERM INT HUP
while [ ! -f stop ]; do
  if [ -f shim.log ] && [ "$(wc -c < shim.log)" -gt 10485760 ]; then mv -f shim.log shim.log.1; fi
  rm -f shim.addr
  ./bin/hoist-shim ` + shimArgs + ` > shim.cur.log 2>&1 &
  child=$!
  echo "$child" > shim.pid
  wait "$child"
  child=
  rm -f shim.addr
  cat shim.cur.log >> shim.log
  [ -f stop ] || sleep 1
done
rm -f supervisor.pid shim.pid
`
}

// fileSum returns the hex SHA-256 of a local file.
func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tarFile is one file of the deploy stream: from a local path or from data.
type tarFile struct {
	name  string
	local string
	data  []byte
	mode  int64
}

// writeTar writes files as a tar stream to w.
func writeTar(w io.Writer, files []tarFile) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		var r io.Reader = bytes.NewReader(f.data)
		size := int64(len(f.data))
		if f.local != "" {
			fh, err := os.Open(f.local)
			if err != nil {
				return err
			}
			defer fh.Close()
			st, err := fh.Stat()
			if err != nil {
				return err
			}
			r, size = fh, st.Size()
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, r); err != nil {
			return err
		}
	}
	return tw.Close()
}
