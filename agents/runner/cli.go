package runner

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// ExitError is returned by Main when the process should exit with Code
// without printing more: 1 for a job that did not end done, 2 when no job
// was submitted in time.
type ExitError struct {
	// Code is the process exit code.
	Code int
}

// Error implements error.
func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Main is the runner's command line: cmd/hoist-runner and `hoist agent
// runner` call it with the arguments after the program name. It serves the
// runner API and runs one job, logging to stderr; ctx ending, SIGINT and
// SIGTERM stop the job. It returns an *ExitError for a job that did not end
// done.
func Main(ctx context.Context, args []string, version string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hoist-runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "/hoist/run/runner.sock", "path of the Unix socket the runner API listens on (it has no TCP port unless --listen)")
	listen := fs.String("listen", "", "instead of --socket, a loopback TCP address (127.0.0.1:PORT, [::1]:PORT) the runner API listens on: in a pod, reached by a port-forward through the Kubernetes API server")
	home := fs.String("home", "/hoist/run", "directory for the job log and state")
	submitTimeout := fs.Duration("submit-timeout", 10*time.Minute, "exit when no job is submitted within this time")
	linger := fs.Duration("linger", 5*time.Minute, "after the job has finished, exit once the API has been idle this long")
	stopGrace := fs.Duration("stop-grace", 10*time.Second, "on SIGTERM, how long the job may take to exit before SIGKILL")
	imageCommand := fs.String("image-command", "", "the image's entrypoint and cmd as a JSON array, run by a job without commands")
	imageWorkDir := fs.String("image-workdir", "", "the image's WORKDIR, the job's default working dir")
	tokenFile := fs.String("token-file", "", "file holding the bearer token every API request must carry (required); the runner deletes it once read")
	terminationLog := fs.String("termination-log", "", "file the runner writes its last job state to, as JSON, when it exits (in a pod: the container's terminationMessagePath, which the kubelet reports once the container has terminated)")
	codeCache := fs.String("code-cache", "", "directory shared by the instance's jobs where code blobs are kept by their SHA-256 (\"\" = none: every blob travels)")
	holdNetns := fs.String("hold-netns", "", "instead of serving a job, join the network namespace bound at this path and wait for SIGTERM (the shim's namespace holder container; needs CAP_SYS_ADMIN)")
	standalone := fs.Bool("standalone", false, "run alone in a container cloud's pod: read the token, the SSH host key, the authorized keys and the SSH address from the environment ("+api.RunnerEnvToken+", "+api.RunnerEnvHostKey+", "+api.RunnerEnvAuthorizedKeys+", "+api.RunnerEnvSSHListen+"; the job sees none of them) and serve SSH there besides the API on --socket")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *holdNetns != "" {
		return HoldNetns(ctx, *holdNetns)
	}
	if *showVersion {
		fmt.Fprintf(stdout, "hoist-runner %s (api %d)\n", version, api.RunnerAPIVersion)
		return nil
	}
	var alone standaloneEnv
	var scrubErr error
	if *standalone {
		// First of all: whatever happens next, nothing the runner starts
		// inherits these.
		env := takeRunnerEnv()
		scrubErr = scrubProcEnviron()
		if *listen != "" || *tokenFile != "" {
			return errors.New("--standalone excludes --listen and --token-file: the API is on --socket and the token in " + api.RunnerEnvToken)
		}
		var err error
		if alone, err = parseStandaloneEnv(env); err != nil {
			return fmt.Errorf("--standalone: %w", err)
		}
	}
	if *listen != "" {
		socketSet := false
		fs.Visit(func(f *flag.Flag) { socketSet = socketSet || f.Name == "socket" })
		if socketSet {
			return errors.New("--listen and --socket exclude each other: the runner API has one address")
		}
		if err := checkLoopback(*listen); err != nil {
			return err
		}
	}
	token := alone.token
	if !*standalone {
		var err error
		if token, err = takeToken(*tokenFile); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if scrubErr != nil {
		// Best effort: the job's own environment holds none of them.
		log.Warn("runner_environ_not_scrubbed", "err", scrubErr)
	}
	var imageCmd []string
	if *imageCommand != "" {
		if err := json.Unmarshal([]byte(*imageCommand), &imageCmd); err != nil {
			return fmt.Errorf("--image-command: %w", err)
		}
	}
	r, err := New(Config{
		Home: *home, Version: version, Logger: log, ImageCommand: imageCmd, ImageWorkingDir: *imageWorkDir,
		Token: token, CodeCache: *codeCache, SSHHostKey: alone.hostKey,
	})
	if err != nil {
		return err
	}
	if *terminationLog != "" {
		defer writeTerminationLog(*terminationLog, r, log)
	}
	var ln net.Listener
	if *listen != "" {
		ln, err = net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	} else if ln, err = listenUnix(*socket); err != nil {
		return err
	}
	if *standalone {
		sln, err := net.Listen("tcp", alone.listen)
		if err != nil {
			ln.Close()
			_ = r.Close()
			return fmt.Errorf("--standalone: %s: %w", api.RunnerEnvSSHListen, err)
		}
		if err := r.ServeSSH(sln, alone.authorizedKeys, *socket); err != nil {
			sln.Close()
			ln.Close()
			_ = r.Close()
			return err
		}
		log.Info("runner_ssh_listening", "addr", sln.Addr().String(), "host_key", ssh.FingerprintSHA256(alone.hostKey.PublicKey()))
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	log.Info("runner_listening", "addr", ln.Addr().String(), "version", version)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	stopped := func(why string) error {
		log.Info("runner_signalled", "signal", why)
		r.Stop(*stopGrace, api.ReasonTerminatedByServer, "runner received "+why)
		<-r.Done()
		return shutdown(srv, r)
	}
	submitDeadline := time.NewTimer(*submitTimeout)
	defer submitDeadline.Stop()
wait:
	for {
		select {
		case <-r.Done():
			break wait
		case err := <-serveErr:
			log.Error("serve_failed", "err", err)
			r.Stop(0, api.ReasonExecutorError, "runner API failed: "+err.Error())
			<-r.Done()
			_ = shutdown(srv, r)
			return fmt.Errorf("serve: %w", err)
		case sig := <-sigs:
			return stopped(sig.String())
		case <-ctx.Done():
			return stopped("context canceled")
		case <-submitDeadline.C:
			if !r.Submitted() {
				r.Stop(0, api.ReasonExecutorError, "no job submitted within "+submitTimeout.String())
				log.Warn("runner_submit_timeout", "timeout", *submitTimeout)
				_ = shutdown(srv, r)
				return &ExitError{Code: 2}
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
		case <-ctx.Done():
			return exitWith(shutdown(srv, r), r)
		}
	}
	log.Info("runner_exiting", "state", r.State().State)
	return exitWith(shutdown(srv, r), r)
}

func shutdown(srv *http.Server, r *Runner) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return r.Close()
}

// exitWith returns an *ExitError with code 1 for a job that is not done.
func exitWith(err error, r *Runner) error {
	if err != nil {
		return err
	}
	if r.State().State != api.JobDone {
		return &ExitError{Code: 1}
	}
	return nil
}

// takeToken reads the runner's token from path and deletes the file, so
// that the job never finds it.
func takeToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("--token-file is required: the runner API is never served without a token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("--token-file: delete it once read: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		return "", fmt.Errorf("--token-file %s: the token must have at least 32 characters", path)
	}
	return token, nil
}

// writeTerminationLog writes r's job state to path as JSON. The kubelet
// keeps at most 4096 bytes of a termination message
// (https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/),
// so a long termination message is cut to fit.
func writeTerminationLog(path string, r *Runner, log *slog.Logger) {
	st := r.State()
	b, _ := json.Marshal(st) // a JobState always marshals
	for len(b) > 4096 && st.TerminationMessage != "" {
		cut := max(0, len(st.TerminationMessage)-(len(b)-4096)-8)
		st.TerminationMessage = strings.ToValidUTF8(st.TerminationMessage[:cut], "")
		b, _ = json.Marshal(st)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Warn("termination_log_write_failed", "path", path, "err", err)
	}
}

// checkLoopback refuses a --listen address that is not a loopback IP
// address with a port: the runner API must not be reachable from the
// network, only from its own network namespace (in Kubernetes, by a
// port-forward through the API server).
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--listen %q: no port", addr)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: not a loopback IP address (127.0.0.1, ::1): the runner API is never served to the network", addr)
	}
	return nil
}

// listenUnix listens on a Unix socket at path, replacing a stale one. The
// socket is made 0666 so that the shim reaches it whichever user the
// container runs as: who may open it is decided by the directories above it
// on the host, which only the shim's user and root can enter (the shim's
// task directory is 0700), and no other container sees it.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--socket: remove the old socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--socket: %w", err)
	}
	return ln, nil
}
