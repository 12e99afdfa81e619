package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// DefaultWorkingDir is where a job runs when neither its spec nor the image
// names a working dir, and what a relative working dir is resolved against:
// "/", as dstack documents for working_dir (the image's working directory,
// or "/" when it has none; dstack: docs/docs/reference/dstack.yml/task.md).
const DefaultWorkingDir = "/"

// drainAfterExit bounds how long the runner keeps reading output after the
// job's shell has exited and its process group was killed; only a process
// that left the group can hold the pipes open that long.
const drainAfterExit = 2 * time.Second

// flushPartialAfter is how long an incomplete line waits for its newline
// before it is recorded on its own.
const flushPartialAfter = 20 * time.Millisecond

// Config configures a Runner.
type Config struct {
	// Home is the runner's directory for the job log and state file; the
	// shim bind-mounts a per-task host directory here.
	Home string
	// Version is the binary's version, reported by the health check.
	Version string
	// Logger receives the runner's own log; nil discards it.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ImageCommand is the image's entrypoint followed by its cmd; a job
	// without commands or entrypoint runs it.
	ImageCommand []string
	// ImageWorkingDir is the image's WORKDIR: the default working dir of the
	// job and the base of a relative one ("" = DefaultWorkingDir).
	ImageWorkingDir string
	// Token, when set, is the bearer token every request must carry, the
	// health check included. Main refuses to serve without one; tests of
	// the job logic may leave it empty.
	Token string
	// LogSegmentBytes is the size of one log segment file, the unit in
	// which acknowledged logs are deleted (0: 16 MiB).
	LogSegmentBytes int64
	// CodeCache, when set, is a directory the instance's jobs share, where
	// the runner keeps the code blobs it received by their SHA-256, so that
	// a later job receives only the files that changed ("" = no cache:
	// every blob travels).
	CodeCache string
	// CodeCacheBytes bounds CodeCache; the least recently used blobs beyond
	// it are evicted (0: 2 GiB).
	CodeCacheBytes int64
	// MPIHostfile is where the job's MPI hostfile is written ("" =
	// DefaultMPIHostfile); tests point it into a temporary directory.
	MPIHostfile string
	// SSHHostKey, when set, is the SSH server's host key; nil means the
	// key kept in Home (generated on first start). A standalone runner is
	// given the key the server pins (api.RunnerEnvHostKey).
	SSHHostKey ssh.Signer
}

// Runner runs one job. Create it with New; serve Handler.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	reaper *reaper
	ssh    *sshServer
	// installing cancels the installation of the job's IDE server while
	// it is under way (startWithIDELocked), when the job has no process
	// yet; guarded by mu.
	installing context.CancelFunc

	activity atomic.Int64 // unix nanos of the last API request

	// codeMu serializes the code's delivery; it guards manifest and blobs.
	codeMu   sync.Mutex
	manifest *api.CodeManifest
	blobs    *blobCache

	mu      sync.Mutex
	spec    *api.JobSpec
	workDir string
	// codePlaced is set once the job's code is in place.
	codePlaced  bool
	state       api.JobState
	changed     chan struct{} // closed and replaced on every state change
	done        chan struct{} // closed once the job has finished
	pid         int           // the job shell, leader of its process group
	stopReason  string
	stopMessage string
	killTimer   *time.Timer
	killAt      time.Time // when killTimer fires
	maxTimer    *time.Timer
	logs        *logStore
	// hostfile is where the job's MPI hostfile was written (writeHostfile);
	// guarded by mu.
	hostfile string
}

// New returns a runner that keeps its files in cfg.Home and starts reaping
// child processes.
func New(cfg Config) (*Runner, error) {
	if cfg.Home == "" {
		return nil, errors.New("runner: home directory is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if err := os.MkdirAll(cfg.Home, 0o755); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	logs, err := openLogStore(filepath.Join(cfg.Home, api.RunnerLogDir), cfg.LogSegmentBytes)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := &Runner{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		reaper:  sharedReaper(),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
		logs:    logs,
	}
	if r.ssh, err = newSSHServer(r, cfg.Home, cfg.SSHHostKey); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.state = api.JobState{State: api.JobPending, Time: r.now()}
	r.touch()
	r.persistLocked()
	return r, nil
}

// Done is closed once the job has finished.
func (r *Runner) Done() <-chan struct{} { return r.done }

// State returns the job's current state.
func (r *Runner) State() api.JobState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Submitted reports whether a job has been submitted.
func (r *Runner) Submitted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spec != nil
}

// LastActivity returns when the API last served a request.
func (r *Runner) LastActivity() time.Time { return time.Unix(0, r.activity.Load()) }

func (r *Runner) touch() { r.activity.Store(r.now().UnixNano()) }

// errConflict marks requests that do not fit the job's state.
var errConflict = errors.New("conflict")

// Submit records the job spec; it may be repeated until Run.
func (r *Runner) Submit(spec api.JobSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.State != api.JobPending {
		return fmt.Errorf("job is %s, submit only before run: %w", r.state.State, errConflict)
	}
	if len(spec.Commands) == 0 && len(spec.Entrypoint) == 0 && len(r.cfg.ImageCommand) == 0 {
		// The docker shim passes the image's entrypoint and cmd
		// (--image-command) when it has them; pods of container clouds
		// and Kubernetes are started without them.
		return errors.New("job has no commands and no image entrypoint or cmd to run instead " +
			"(on RunPod, Vast.ai and Kubernetes a job must set commands)")
	}
	base := DefaultWorkingDir
	if r.cfg.ImageWorkingDir != "" && filepath.IsAbs(r.cfg.ImageWorkingDir) {
		base = r.cfg.ImageWorkingDir
	}
	wd := spec.WorkingDir
	switch {
	case wd == "":
		wd = base
	case !filepath.IsAbs(wd):
		wd = filepath.Join(base, wd)
	}
	if spec.Code != nil && spec.Code.RepoIfExists != "" && spec.Code.RepoIfExists != api.RepoIfExistsError && spec.Code.RepoIfExists != api.RepoIfExistsSkip {
		return fmt.Errorf("code: unknown repo_if_exists %q", spec.Code.RepoIfExists)
	}
	keys := make([]ssh.PublicKey, 0, len(spec.AuthorizedKeys))
	for i, line := range spec.AuthorizedKeys {
		k, err := parseAuthorizedKey(line)
		if err != nil {
			return fmt.Errorf("authorized_keys[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	r.ssh.setAuthorizedKeys(keys)
	r.spec = &spec
	r.workDir = filepath.Clean(wd)
	r.log.Info("job_submitted", "run_name", spec.RunName, "job_id", spec.JobID, "working_dir", r.workDir)
	return nil
}

// Run starts the submitted job.
func (r *Runner) Run() (api.RunResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spec == nil {
		return api.RunResponse{}, fmt.Errorf("no job submitted: %w", errConflict)
	}
	if r.state.State != api.JobPending {
		return api.RunResponse{}, fmt.Errorf("job is %s, run only once: %w", r.state.State, errConflict)
	}
	if r.spec.Code != nil && !r.codePlaced {
		return api.RunResponse{}, fmt.Errorf("%w: %w", errCodeNotUploaded, errConflict)
	}
	if r.spec.IDE != nil {
		r.startWithIDELocked()
		return api.RunResponse{WorkingDir: r.workDir, State: r.state}, nil
	}
	if err := r.startLocked(); err != nil {
		r.log.Error("job_start_failed", "err", err)
		r.finishLocked(api.JobState{State: api.JobFailed, TerminationReason: api.ReasonExecutorError, TerminationMessage: err.Error()})
		r.logs.close()
		return api.RunResponse{WorkingDir: r.workDir, State: r.state}, nil
	}
	return api.RunResponse{WorkingDir: r.workDir, State: r.state}, nil
}

// argv returns what the job runs: the commands in the shell; or the job's
// entrypoint with the commands as its arguments; or, with neither, the
// image's entrypoint and cmd.
func (r *Runner) argv() []string {
	spec := r.spec
	switch {
	case len(spec.Entrypoint) > 0:
		return append(append([]string(nil), spec.Entrypoint...), spec.Commands...)
	case len(spec.Commands) == 0:
		return append([]string(nil), r.cfg.ImageCommand...)
	}
	shell := spec.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	return []string{shell, "-c", script(spec.Commands)}
}

// jobEnvPath returns the PATH the job will see.
func (r *Runner) jobEnvPath() string {
	for _, kv := range r.env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// script joins the commands into one shell script that stops at the first
// command that fails, with that command's exit code.
func script(commands []string) string {
	var b strings.Builder
	for _, c := range commands {
		b.WriteString(c)
		b.WriteString("\n__hoist_rc=$?; if [ \"$__hoist_rc\" -ne 0 ]; then exit \"$__hoist_rc\"; fi\n")
	}
	return b.String()
}

func (r *Runner) env() []string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HOIST_RUNNER_") {
			continue
		}
		m[k] = v
	}
	if m["HOME"] == "" {
		m["HOME"] = "/root"
	}
	if m["PATH"] == "" {
		m["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	// dstack's variables come first: the spec's env and secrets may
	// override them, as in dstack's runner; hoist's own come last.
	r.dstackEnv(m)
	for k, v := range r.spec.Env {
		m[k] = v
	}
	for k, v := range r.spec.Secrets {
		m[k] = v
	}
	m["HOIST_RUN_NAME"] = r.spec.RunName
	m["HOIST_JOB_ID"] = r.spec.JobID
	m["HOIST_WORKING_DIR"] = r.workDir
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

func (r *Runner) startLocked() error {
	if err := os.MkdirAll(r.workDir, 0o755); err != nil {
		return fmt.Errorf("create working dir: %w", err)
	}
	if err := r.writeHostfile(); err != nil {
		return err
	}
	if err := r.setupClusterSSHLocked(); err != nil {
		return err
	}
	argv := r.argv()
	path, err := lookPathIn(argv[0], r.jobEnvPath())
	if err != nil {
		return fmt.Errorf("find %s: %w", argv[0], err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdout pipe: %w", err)
	}
	growPipe(outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("stderr pipe: %w", err)
	}
	growPipe(errW)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	proc, exited, err := r.reaper.start(path, argv, &os.ProcAttr{
		Dir:   r.workDir,
		Env:   r.env(),
		Files: []*os.File{devnull, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	devnull.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	// The pid is kept apart from proc: Release sets proc.Pid to -1, and a
	// kill of -(-1) would signal PID 1.
	pid := proc.Pid
	r.pid = pid
	_ = proc.Release() // the reaper waits for it, not os.Process
	r.setStateLocked(api.JobState{State: api.JobRunning})
	r.ssh.jobStarted(r.state.Time)
	r.log.Info("job_started", "pid", pid, "program", argv[0])

	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); r.pump(api.StreamStdout, outR) }()
	go func() { defer pumps.Done(); r.pump(api.StreamStderr, errR) }()
	r.startMaxTimerLocked()
	go func() {
		ws := <-exited
		r.mu.Lock()
		stopping, killAt := r.stopReason != "", r.killAt
		r.mu.Unlock()
		if stopping {
			// The shell died of SIGTERM, its children may still be
			// cleaning up: give them the rest of the grace period.
			for groupAlive(pid) && time.Now().Before(killAt) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		// Whatever the shell left behind in its group goes with it.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		drained := make(chan struct{})
		go func() { pumps.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(drainAfterExit):
			// A process that left the group still holds the pipes.
			outR.Close()
			errR.Close()
			<-drained
		}
		r.logs.close()
		r.exited(ws)
	}()
	return nil
}

// startMaxTimerLocked stops the job once it has run for its max duration,
// counted from its start (an IDE server's installation included).
func (r *Runner) startMaxTimerLocked() {
	d := r.spec.MaxDuration
	if d <= 0 || r.maxTimer != nil {
		return
	}
	r.maxTimer = time.AfterFunc(d, func() {
		r.log.Info("job_max_duration_exceeded", "max_duration", d)
		r.Stop(10*time.Second, api.ReasonMaxDurationExceeded, fmt.Sprintf("job ran longer than its max duration %s", d))
	})
}

// logRetryInterval is how long the pump waits before it writes a record
// again after the disk refused it.
const logRetryInterval = 500 * time.Millisecond

// diskFull reports whether err is the file system's refusal for lack of
// room (ENOSPC, or EDQUOT for a quota): a write that may succeed later.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// appendLog records b, retrying while the disk refuses it (full): the record
// is not dropped, the pump stops reading meanwhile and the job's writes
// block on the full pipe, so no output is lost. It gives up on any other error
// (a closed log among them), and once the job was told to stop and its
// grace period is over.
func (r *Runner) appendLog(stream string, b []byte) (int64, error) {
	t := r.now()
	for attempt := 0; ; attempt++ {
		kept, err := r.logs.append(stream, b, t)
		if err == nil || !diskFull(err) {
			return kept, err
		}
		r.mu.Lock()
		giveUp := r.stopReason != "" && r.now().After(r.killAt)
		r.mu.Unlock()
		if giveUp {
			return kept, err
		}
		if attempt == 0 {
			r.log.Warn("log_append_retrying", "err", err)
		}
		time.Sleep(logRetryInterval)
	}
}

// pump records one output stream: whole lines, in records of up to 256 KiB;
// an incomplete line is recorded after flushPartialAfter without more output.
func (r *Runner) pump(stream string, f *os.File) {
	defer f.Close()
	buf := make([]byte, 256<<10)
	n := 0
	emit := func(b []byte) {
		if len(b) == 0 {
			return
		}
		kept, err := r.appendLog(stream, b)
		if err != nil {
			r.log.Error("log_append_failed", "err", err)
			return
		}
		r.mu.Lock()
		quota := r.spec.LogQuotaBytes
		r.mu.Unlock()
		if quota > 0 && kept > quota {
			r.Stop(0, api.ReasonLogQuotaExceeded, fmt.Sprintf("the job's unacknowledged log on disk exceeded its quota of %d bytes", quota))
		}
	}
	for {
		if n > 0 {
			_ = f.SetReadDeadline(time.Now().Add(flushPartialAfter))
		} else {
			_ = f.SetReadDeadline(time.Time{})
		}
		m, err := f.Read(buf[n:])
		n += m
		if i := lastNewline(buf[:n]); i >= 0 {
			emit(buf[:i+1])
			n = copy(buf, buf[i+1:n])
		} else if n == len(buf) {
			emit(buf[:n])
			n = 0
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				emit(buf[:n])
				n = 0
				continue
			}
			emit(buf[:n])
			return
		}
	}
}

func lastNewline(b []byte) int { return bytes.LastIndexByte(b, '\n') }

// exited records the job's end from the shell's wait status.
func (r *Runner) exited(ws syscall.WaitStatus) {
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := api.JobState{ExitCode: &code}
	switch {
	case r.stopReason != "":
		st.State = api.JobTerminated
		st.TerminationReason = r.stopReason
		st.TerminationMessage = r.stopMessage
	case code == 0:
		st.State = api.JobDone
		st.TerminationReason = api.ReasonDoneByRunner
	default:
		st.State = api.JobFailed
		st.TerminationReason = api.ReasonContainerExitedWithError
		st.TerminationMessage = fmt.Sprintf("commands exited with code %d", code)
	}
	r.log.Info("job_finished", "state", st.State, "exit_code", code, "reason", st.TerminationReason)
	r.finishLocked(st)
}

func (r *Runner) finishLocked(st api.JobState) {
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	if r.maxTimer != nil {
		r.maxTimer.Stop()
	}
	r.setStateLocked(st)
	// Nothing is left to SSH into, by the time anyone learns the job ended.
	r.ssh.closeAll()
	close(r.done)
}

// Stop ends the job: SIGTERM to its process group, SIGKILL after grace. The
// first reason given is the one recorded. A pending job ends at once. Stop
// returns a channel closed when the job has finished.
func (r *Runner) Stop(grace time.Duration, reason, message string) <-chan struct{} {
	if reason == "" {
		reason = api.ReasonTerminatedByServer
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state.State {
	case api.JobPending:
		r.logs.close()
		r.finishLocked(api.JobState{State: api.JobTerminated, TerminationReason: reason, TerminationMessage: message})
		return r.done
	case api.JobRunning:
	default:
		return r.done
	}
	if r.stopReason == "" {
		r.stopReason, r.stopMessage = reason, message
	}
	if r.installing != nil {
		// No process yet: the installation ends, and with it the job.
		r.installing()
		return r.done
	}
	pid := r.pid
	r.log.Info("job_stopping", "reason", reason, "grace", grace)
	if grace <= 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return r.done
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	if r.killTimer == nil {
		r.killAt = time.Now().Add(grace)
		r.killTimer = time.AfterFunc(grace, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	}
	return r.done
}

func (r *Runner) setStateLocked(st api.JobState) {
	st.Time = r.now()
	r.state = st
	close(r.changed)
	r.changed = make(chan struct{})
	r.persistLocked()
}

// persistLocked writes the state file atomically.
func (r *Runner) persistLocked() {
	b, err := json.Marshal(r.state)
	if err != nil {
		return
	}
	tmp := filepath.Join(r.cfg.Home, api.RunnerStateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		r.log.Error("state_write_failed", "err", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(r.cfg.Home, api.RunnerStateFile)); err != nil {
		r.log.Error("state_write_failed", "err", err)
	}
}

// waitChange returns the current state and a channel closed on its next change.
func (r *Runner) waitChange() (api.JobState, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state, r.changed
}

// Close closes the SSH connections and listeners and the log files. It
// does not stop the job.
func (r *Runner) Close() error {
	r.ssh.shutdown()
	return r.logs.closeFiles()
}

// growPipe asks for a 1 MiB pipe buffer (best effort; the default is 64 KiB),
// so that a fast writer blocks less often.
func growPipe(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, 1<<20)
		})
	}
}

// fSetPipeSz is fcntl's F_SETPIPE_SZ.
const fSetPipeSz = 1031
