// Command hoist-shim is hoist's host agent: it serves the shim HTTP API
// (package hoist/agents/api) and runs each task as a Docker container whose
// entrypoint is the hoist-runner binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"hoist/agents/shim"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hoist-shim:", err)
		os.Exit(1)
	}
}

func run() error {
	labels := labelFlags{}
	listen := flag.String("listen", "127.0.0.1:10998", "address of the shim API")
	stateDir := flag.String("state-dir", "/var/lib/hoist-shim", "directory for task state and runner directories")
	runnerBinary := flag.String("runner-binary", "", "host path of the static hoist-runner binary (default: hoist-runner next to this binary)")
	dockerHost := flag.String("docker-host", "", "Docker Engine address (default: DOCKER_HOST or the local socket)")
	id := flag.String("id", "", "shim id in container labels (default: derived from --state-dir)")
	addrFile := flag.String("addr-file", "", "write the address the shim listens on to this file (useful with --listen 127.0.0.1:0)")
	flag.Var(labels, "label", "key=value label added to every container (repeatable)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("hoist-shim %s (api %d)\n", version, api.ShimAPIVersion)
		return nil
	}
	if *runnerBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find runner binary: %w", err)
		}
		*runnerBinary = filepath.Join(filepath.Dir(exe), "hoist-runner")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := shim.New(shim.Config{
		DockerHost:   *dockerHost,
		RunnerBinary: *runnerBinary,
		StateDir:     *stateDir,
		ID:           *id,
		Labels:       labels,
		Version:      version,
		Logger:       log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
