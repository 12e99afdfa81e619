package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hoist/agents/api"
	"hoist/backends"
)

var _ backends.GatewayHost = (*Backend)(nil)

// Defaults of the gateway's listeners (Config.Gateway*): the loopback
// address and the ports a gateway VM serves (dstack's gateway listens on
// 80 and 443).
const (
	DefaultGatewayAddress   = "127.0.0.1"
	DefaultGatewayHTTPPort  = 80
	DefaultGatewayHTTPSPort = 443
)

// gatewayStop bounds how long StopGateway waits for the gateway to drain
// after SIGTERM before it kills it (the gateway drains for at most 10 s).
const gatewayStop = 15 * time.Second

// gatewayStart bounds how long StartGateway waits for a new gateway's
// health check.
const gatewayStart = 15 * time.Second

// Files of a gateway under its instance's directory.
const (
	gatewayDirName  = "gw"
	gatewayTokenF   = "token"
	gatewayPidF     = "gateway.pid"
	gatewayLogF     = "gateway.log"
	gatewayStateDir = "state"
)

func (b *Backend) gatewayDir(id string) string { return filepath.Join(b.instDir(id), gatewayDirName) }

// gatewaySocketPath is the admin socket of instance id's gateway. A Unix
// socket's path must fit in sun_path (108 bytes, unix(7)), which a path
// under a deep data directory does not, so the socket lives in a directory
// of this user's under the temporary directory, named for the instance's
// directory.
func (b *Backend) gatewaySocketPath(id string) string {
	sum := sha256.Sum256([]byte(b.instDir(id)))
	return filepath.Join(os.TempDir(), fmt.Sprintf("hoist-gw-%d", os.Geteuid()), hex.EncodeToString(sum[:8])+".sock")
}

// ownDir makes dir 0700 and refuses one that is a symlink or another
// user's, so that nobody else can put a socket where the server looks.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory of this user", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// endpoint returns where the gateway of instance id answers.
func (b *Backend) gatewayEndpoint(id string) backends.GatewayEndpoint {
	return backends.GatewayEndpoint{
		AdminURL:   api.UnixAddr(b.gatewaySocketPath(id)),
		PublicAddr: b.cfg.GatewayAddress,
		HTTPPort:   b.cfg.GatewayHTTPPort,
		HTTPSPort:  b.cfg.GatewayHTTPSPort,
	}
}

// StartGateway runs `hoist gateway` (Config.GatewayBinary) for the
// instance as a process of its own session, so that it outlives this
// server: its log, pid file, token file and state under the instance's
// directory, its admin socket at gatewaySocketPath, its public listeners
// on GatewayAddress. A gateway
// already running with spec's token is kept (a restarted server finds it
// by its pid file and health check); one with another token is restarted.
func (b *Backend) StartGateway(ctx context.Context, inst backends.Instance, spec backends.GatewayProcess) (backends.GatewayEndpoint, error) {
	b.mu.Lock()
	_, ok := b.insts[inst.ID]
	closed := b.closed
	b.mu.Unlock()
	switch {
	case closed:
		return backends.GatewayEndpoint{}, errClosed
	case !ok:
		return backends.GatewayEndpoint{}, backends.Transient(fmt.Errorf("local backend: instance %s does not run in this server: %w", inst.ID, backends.ErrUnreachable))
	case b.cfg.GatewayBinary == "":
		return backends.GatewayEndpoint{}, backends.Stalled(errors.New("local backend: no hoist binary to run as the gateway (Deps.GatewayBinary)"))
	case spec.Token == "":
		return backends.GatewayEndpoint{}, errors.New("local backend: gateway token is required")
	}
	dir := b.gatewayDir(inst.ID)
	ep := b.gatewayEndpoint(inst.ID)
	if pid, ok := b.gatewayPID(dir); ok {
		old, _ := os.ReadFile(filepath.Join(dir, gatewayTokenF))
		if string(old) == spec.Token && b.gatewayHealthy(ctx, ep, spec.Token) == nil {
			return ep, nil
		}
		b.log.Info("gateway_restarting", "instance", inst.ID, "pid", pid)
		if err := b.stopGateway(ctx, inst.ID); err != nil {
			return backends.GatewayEndpoint{}, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, gatewayStateDir), 0o700); err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s: %w", inst.ID, err)
	}
	sock := b.gatewaySocketPath(inst.ID)
	if err := ownDir(filepath.Dir(sock)); err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s: %w", inst.ID, err)
	}
	tokenFile := filepath.Join(dir, gatewayTokenF)
	if err := os.WriteFile(tokenFile, []byte(spec.Token), 0o600); err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s: %w", inst.ID, err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, gatewayLogF), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s: %w", inst.ID, err)
	}
	defer logf.Close()
	hostPort := func(p int) string { return net.JoinHostPort(b.cfg.GatewayAddress, strconv.Itoa(p)) }
	cmd := exec.Command(b.cfg.GatewayBinary, "gateway",
		"--state-dir", filepath.Join(dir, gatewayStateDir),
		"--admin-socket", sock,
		"--token-file", tokenFile,
		"--http", hostPort(b.cfg.GatewayHTTPPort),
		"--https", hostPort(b.cfg.GatewayHTTPSPort))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: no signal to the server's process group reaches it,
	// and it goes on when the server exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: start gateway of %s: %w", inst.ID, err)
	}
	pid := cmd.Process.Pid
	// Reaped here while this server runs; after it exits, init reaps it.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, gatewayPidF), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s: %w", inst.ID, err)
	}
	b.log.Info("gateway_started", "instance", inst.ID, "pid", pid, "http", hostPort(b.cfg.GatewayHTTPPort), "https", hostPort(b.cfg.GatewayHTTPSPort))
	deadline := time.Now().Add(gatewayStart)
	for {
		err := b.gatewayHealthy(ctx, ep, spec.Token)
		if err == nil {
			return ep, nil
		}
		if _, alive := b.gatewayPID(dir); !alive || time.Now().After(deadline) || ctx.Err() != nil {
			_ = b.stopGateway(context.WithoutCancel(ctx), inst.ID)
			return backends.GatewayEndpoint{}, fmt.Errorf("local backend: gateway of %s did not start (see %s): %w", inst.ID, filepath.Join(dir, gatewayLogF), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gatewayHealthy asks the gateway's health check with token.
func (b *Backend) gatewayHealthy(ctx context.Context, ep backends.GatewayEndpoint, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := api.NewGatewayClient(ep.AdminURL, nil, token).Health(ctx)
	return err
}

// gatewayPID returns the pid of the gateway of dir when its pid file names
// a live process that is this gateway (its command line names dir's state
// directory: not another process that got the pid since).
func (b *Backend) gatewayPID(dir string) (int, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, gatewayPidF))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(filepath.Join(dir, gatewayStateDir))) {
		return pid, false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err == nil {
		// A zombie (state Z, see proc(5)) has exited.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return pid, false
		}
	}
	return pid, true
}

// StopGateway stops the instance's gateway: SIGTERM, then SIGKILL when it
// has not exited after gatewayStop. Not running is success.
func (b *Backend) StopGateway(ctx context.Context, inst backends.Instance) error {
	return b.stopGateway(ctx, inst.ID)
}

func (b *Backend) stopGateway(ctx context.Context, id string) error {
	dir := b.gatewayDir(id)
	pid, alive := b.gatewayPID(dir)
	if alive {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(gatewayStop)
		for alive {
			if time.Now().After(deadline) || ctx.Err() != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				b.log.Warn("gateway_killed", "instance", id, "pid", pid)
				time.Sleep(100 * time.Millisecond)
				break
			}
			time.Sleep(50 * time.Millisecond)
			_, alive = b.gatewayPID(dir)
		}
		b.log.Info("gateway_stopped", "instance", id, "pid", pid)
	}
	if err := os.Remove(filepath.Join(dir, gatewayPidF)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local backend: stop gateway of %s: %w", id, err)
	}
	return nil
}
