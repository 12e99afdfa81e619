package shim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"hoist/agents/api"
)

// DeviceDirEnv is the environment variable that tells Main where the
// NVIDIA device nodes are (see Main).
const DeviceDirEnv = "HOIST_SHIM_DEVICE_DIR"

// labelFlags collects repeated --label key=value flags.
type labelFlags map[string]string

func (l labelFlags) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q is not key=value", v)
	}
	l[k] = val
	return nil
}

// Main is the shim's command line: cmd/hoist-shim and `hoist agent shim`
// call it with the arguments after the program name. It serves the shim
// API until ctx ends, SIGINT or SIGTERM, logging to stderr, and returns
// nil on a clean stop. version is the binary's version; runnerFallback is
// the runner binary used when --runner-binary is not given ("" means
// hoist-runner next to the running executable).
//
// The environment variable DeviceDirEnv, when set, names the directory of
// the NVIDIA GPUs' device nodes (Config.DeviceDir; /dev otherwise): a host
// whose nodes live elsewhere, or a test host that simulates GPUs with a
// fake nvidia-smi on PATH and nodes of its own. It is an environment
// variable rather than a flag because the server starts SSH hosts' shims
// with a command line of its own (backends/sshfleet) and the host's login
// environment (e.g. sshd's SetEnv) passes it on.
func Main(ctx context.Context, args []string, version, runnerFallback string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hoist-shim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	labels := labelFlags{}
	listen := fs.String("listen", "127.0.0.1:10998", "address of the shim API")
	stateDir := fs.String("state-dir", "/var/lib/hoist-shim", "directory for task state and runner directories")
	runnerBinary := fs.String("runner-binary", "", "host path of the static hoist-runner binary (default: hoist-runner next to this binary)")
	dockerHost := fs.String("docker-host", "", "Docker Engine address (default: DOCKER_HOST or the local socket)")
	id := fs.String("id", "", "shim id in container labels (default: derived from --state-dir)")
	addrFile := fs.String("addr-file", "", "write the address the shim listens on to this file (useful with --listen 127.0.0.1:0)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token every API request must carry (required; mode 0600, written by the server)")
	fs.Var(labels, "label", "key=value label added to every container (repeatable)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Fprintf(stdout, "hoist-shim %s (api %d)\n", version, api.ShimAPIVersion)
		return nil
	}
	if *runnerBinary == "" {
		*runnerBinary = runnerFallback
	}
	if *runnerBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find runner binary: %w", err)
		}
		*runnerBinary = filepath.Join(filepath.Dir(exe), "hoist-runner")
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	s, err := New(Config{
		Token:        token,
		DockerHost:   *dockerHost,
		RunnerBinary: *runnerBinary,
		StateDir:     *stateDir,
		ID:           *id,
		Labels:       labels,
		Version:      version,
		Logger:       log,
		DeviceDir:    os.Getenv(DeviceDirEnv),
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Recover(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if *addrFile != "" {
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("write addr file: %w", err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return fmt.Errorf("write addr file: %w", err)
		}
	}
	// Keep this message and its addr key: supervisors parse them.
	log.Info("shim_listening", "addr", ln.Addr().String(), "version", version, "shim_id", s.ID())
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	// Containers keep running; the next shim on this state dir recovers them.
	return s.Close()
}

// readToken reads the shim's token from path, which only its owner may read
// or write.
func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("--token-file is required: the shim API is never served without a token")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s: mode %v, want 0600 (readable by its owner only)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenLen {
		return "", fmt.Errorf("--token-file %s: the token must have at least %d characters", path, minTokenLen)
	}
	return token, nil
}
