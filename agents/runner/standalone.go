package runner

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// runnerEnvPrefix begins the names of the variables meant for the runner
// alone (api.RunnerEnvURL and the rest); the job never sees them.
const runnerEnvPrefix = "HOIST_RUNNER_"

// standaloneEnv is what a standalone runner (--standalone, in a container
// cloud's pod) reads from its environment (see agents/api/standalone.go).
type standaloneEnv struct {
	// token is api.RunnerEnvToken: every API request must carry it.
	token string
	// hostKey is api.RunnerEnvHostKey, parsed.
	hostKey ssh.Signer
	// authorizedKeys are api.RunnerEnvAuthorizedKeys, parsed.
	authorizedKeys []ssh.PublicKey
	// listen is api.RunnerEnvSSHListen, or 0.0.0.0:api.PodSSHPort.
	listen string
}

// takeRunnerEnv returns the variables of the environment meant for the
// runner (runnerEnvPrefix) and removes them from it, so that nothing the
// runner starts inherits them. The values are copies: scrubProcEnviron may
// then overwrite the originals.
func takeRunnerEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, runnerEnvPrefix) {
			env[k] = strings.Clone(v)
			_ = os.Unsetenv(k)
		}
	}
	return env
}

// scrubProcEnviron overwrites with NUL bytes the runner's variables
// (runnerEnvPrefix) in the environment the process started with, which
// /proc/PID/environ shows for as long as it runs (see proc_pid_environ(5)):
// a standalone runner is its container's PID 1, and a job running as root
// could read them there. It finds that memory through env_start and
// env_end of /proc/self/stat (proc_pid_stat(5)) and writes it through
// /proc/self/mem. Call it after takeRunnerEnv: Go's own copy of the
// environment refers to that memory.
func scrubProcEnviron() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// pid (comm) state ...: fields from the third on follow the last ')';
	// env_start and env_end are fields 50 and 51.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return errors.New("/proc/self/stat: no ')'")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 49 {
		return errors.New("/proc/self/stat: no env_start and env_end (Linux before 3.5)")
	}
	start, err1 := strconv.ParseInt(f[47], 10, 64)
	end, err2 := strconv.ParseInt(f[48], 10, 64)
	if err1 != nil || err2 != nil || end <= start || end-start > 64<<20 {
		return fmt.Errorf("/proc/self/stat: env_start %q, env_end %q", f[47], f[48])
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	buf := make([]byte, end-start)
	if _, err := mem.ReadAt(buf, start); err != nil {
		return fmt.Errorf("read the environment: %w", err)
	}
	for off := 0; off < len(buf); {
		n := bytes.IndexByte(buf[off:], 0)
		if n < 0 {
			n = len(buf) - off
		}
		if bytes.HasPrefix(buf[off:off+n], []byte(runnerEnvPrefix)) {
			if _, err := mem.WriteAt(make([]byte, n), start+int64(off)); err != nil {
				return fmt.Errorf("overwrite the environment: %w", err)
			}
		}
		off += n + 1
	}
	return nil
}

// parseStandaloneEnv reads a standalone runner's settings from env (the
// variables takeRunnerEnv took). Each error names the variable at fault.
func parseStandaloneEnv(env map[string]string) (standaloneEnv, error) {
	var s standaloneEnv
	s.token = strings.TrimSpace(env[api.RunnerEnvToken])
	switch {
	case s.token == "":
		return s, fmt.Errorf("%s is not set: the runner API is never served without a token", api.RunnerEnvToken)
	case len(s.token) < 32:
		return s, fmt.Errorf("%s: the token must have at least 32 characters", api.RunnerEnvToken)
	}

	enc := strings.TrimSpace(env[api.RunnerEnvHostKey])
	if enc == "" {
		return s, fmt.Errorf("%s is not set: the runner needs the SSH host key the server pins", api.RunnerEnvHostKey)
	}
	pemKey, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return s, fmt.Errorf("%s: not base64 (standard encoding): %w", api.RunnerEnvHostKey, err)
	}
	if s.hostKey, err = ssh.ParsePrivateKey(pemKey); err != nil {
		return s, fmt.Errorf("%s: not an unencrypted OpenSSH PEM private key: %w", api.RunnerEnvHostKey, err)
	}

	for i, line := range strings.Split(env[api.RunnerEnvAuthorizedKeys], "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseAuthorizedKey(line)
		if err != nil {
			return s, fmt.Errorf("%s line %d: %w", api.RunnerEnvAuthorizedKeys, i+1, err)
		}
		s.authorizedKeys = append(s.authorizedKeys, k)
	}
	if len(s.authorizedKeys) == 0 {
		return s, fmt.Errorf("%s holds no key: nobody could reach the runner", api.RunnerEnvAuthorizedKeys)
	}

	s.listen = strings.TrimSpace(env[api.RunnerEnvSSHListen])
	if s.listen == "" {
		s.listen = net.JoinHostPort("0.0.0.0", strconv.Itoa(api.PodSSHPort))
	}
	if _, port, err := net.SplitHostPort(s.listen); err != nil {
		return s, fmt.Errorf("%s %q: %w", api.RunnerEnvSSHListen, s.listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return s, fmt.Errorf("%s %q: the port must be a number from 1 to 65535", api.RunnerEnvSSHListen, s.listen)
	}
	return s, nil
}

// ServeSSH serves SSH on ln until Close, as a standalone runner does on
// its port: connections authenticate with keys or the job's authorized
// keys, and stay open when the job ends, while the runner lingers. They
// are not counted in api.SSHActivity: the server holds one throughout. On
// them, as on every SSH connection, a direct-streamlocal channel to
// apiSocket, the runner's API socket (or to api.StandaloneSocket, its name
// for the server), opens whatever the job's state; sessions and port
// forwarding open while the job runs, as on every connection.
func (r *Runner) ServeSSH(ln net.Listener, keys []ssh.PublicKey, apiSocket string) error {
	s := r.ssh
	s.mu.Lock()
	switch {
	case s.shut:
		s.mu.Unlock()
		return errors.New("runner: closed")
	case s.controlLn != nil:
		s.mu.Unlock()
		return errors.New("runner: already serving SSH on " + s.controlLn.Addr().String())
	}
	s.controlLn = ln
	s.apiSocket = apiSocket
	s.mu.Unlock()
	go s.accept(ln, keys, true)
	return nil
}
