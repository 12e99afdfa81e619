// Command hoist-runner is hoist's in-container agent. The shim bind-mounts
// this static binary into a task's container and makes it the entrypoint; it
// serves the runner HTTP API (package hoist/agents/api) and runs one job.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hoist-runner:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "0.0.0.0:10999", "address of the runner API")
	home := flag.String("home", "/hoist/run", "directory for the job log and state")
	submitTimeout := flag.Duration("submit-timeout", 10*time.Minute, "exit when no job is submitted within this time")
	linger := flag.Duration("linger", 5*time.Minute, "after the job has finished, exit once the API has been idle this long")
	stopGrace := flag.Duration("stop-grace", 10*time.Second, "on SIGTERM, how long the job may take to exit before SIGKILL")
	imageCommand := flag.String("image-command", "", "the image's entrypoint and cmd as a JSON array, run by a job without commands")
	imageWorkDir := flag.String("image-workdir", "", "the image's WORKDIR, the job's default working dir")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("hoist-runner %s (api %d)\n", version, api.RunnerAPIVersion)
		return nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var imageCmd []string
	if *imageCommand != "" {
		if err := json.Unmarshal([]byte(*imageCommand), &imageCmd); err != nil {
			return fmt.Errorf("--image-command: %w", err)
		}
	}
	r, err := runner.New(runner.Config{
		Home: *home, Version: version, Logger: log, ImageCommand: imageCmd, ImageWorkingDir: *imageWorkDir,
		Token: os.Getenv("HOIST_RUNNER_TOKEN"), // set by the shim; kept out of the job's environment
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve_failed", "err", err)
			os.Exit(1)
		}
	}()
	log.Info("runner_listening", "addr", ln.Addr().String(), "version", version)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	submitDeadline := time.NewTimer(*submitTimeout)
	defer submitDeadline.Stop()
wait:
	for {
		select {
		case <-r.Done():
			break wait
		case sig := <-sigs:
			log.Info("runner_signalled", "signal", sig.String())
			r.Stop(*stopGrace, api.ReasonTerminatedByServer, "runner received "+sig.String())
			<-r.Done()
			return shutdown(srv, r)
		case <-submitDeadline.C:
			if !r.Submitted() {
				r.Stop(0, api.ReasonExecutorError, "no job submitted within "+submitTimeout.String())
				log.Warn("runner_submit_timeout", "timeout", *submitTimeout)
				_ = shutdown(srv, r)
				os.Exit(2)
			}
		}
	}
	// Keep serving until the server has had its chance to read the logs.
	for {
		idle := time.Since(r.LastActivity())
		if idle >= *linger {
			break
		}
		select {
		case <-time.After(*linger - idle):
		case sig := <-sigs:
			log.Info("runner_signalled", "signal", sig.String())
			return exitWith(shutdown(srv, r), r)
		}
	}
	log.Info("runner_exiting", "state", r.State().State)
	return exitWith(shutdown(srv, r), r)
}

func shutdown(srv *http.Server, r *runner.Runner) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return r.Close()
}

// exitWith exits 0 for a job that is done and 1 otherwise.
func exitWith(err error, r *runner.Runner) error {
	if err != nil {
		return err
	}
	if r.State().State != api.JobDone {
		os.Exit(1)
	}
	return nil
}
