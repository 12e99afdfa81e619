package sshfleet

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"hoist/backends"
	"hoist/backends/tunnel"
)

// gatewayDir is the directory of the gateway process under an instance's
// directory: its supervisor script, token, admin socket, pid files, log and
// state (the gateway's own, in state/).
const gatewayDir = "gateway"

// gatewayStopWait bounds how long stopping the gateway waits for it to drain
// before it is killed.
const gatewayStopWait = 20 * time.Second

// gatewayStartWait bounds how long starting the gateway waits for its admin
// socket to appear.
const gatewayStartWait = 15 * time.Second

// A GatewayRun is how to run hoist's gateway (`hoist gateway`) on a host the
// backend took over: the cloud-VM engine (backends/vm) runs it on a gateway
// instance's VM.
type GatewayRun struct {
	// Binary is the local hoist binary to run; it must be a static ELF
	// executable for the host's architecture. It is uploaded as bin/hoist
	// next to the agents, unless the host has it already (SHA-256).
	Binary string
	// Token is the admin token, written to gateway/token (mode 0600 in a
	// 0700 directory), never on a command line.
	Token string
	// HTTPPort and HTTPSPort are the ports of the public listeners, bound
	// on the host's own address (the one its SSH connection arrives at,
	// which on a cloud VM is its private address; the provider NATs the
	// public one to it).
	HTTPPort, HTTPSPort int
}

// A GatewayProc is where a started gateway runs on its host.
type GatewayProc struct {
	// Socket is the path of the admin socket on the host.
	Socket string
	// IP is the host's own address the public listeners bind.
	IP string
	// Started is false when the gateway already ran with the same binary,
	// token and arguments and was left alone.
	Started bool
}

// StartGatewayProcess runs hoist's gateway on the host of instance id under
// a supervisor (gateway/supervise.sh, like the shim's) that outlives the SSH
// connection and the server and restarts it when it exits:
//
//	hoist gateway --state-dir <dir>/gateway/state --admin-socket <dir>/gateway/admin.sock
//	  --token-file <dir>/gateway/token --http <IP>:<HTTPPort> --https <IP>:<HTTPSPort>
//
// It is idempotent: a gateway already running with the same binary, token
// and arguments is left alone; any difference restarts it. It returns once
// the admin socket exists, or with an error quoting the end of the
// gateway's log. A login user other than root is given the right to bind
// ports below 1024 through sudo (capabilities(7) CAP_NET_BIND_SERVICE on
// the binary, else the net.ipv4.ip_unprivileged_port_start sysctl).
func (b *Backend) StartGatewayProcess(ctx context.Context, id string, g GatewayRun) (GatewayProc, error) {
	if g.Binary == "" {
		return GatewayProc{}, backends.Stalled(errors.New("sshfleet: no hoist binary to run the gateway with (the server does not know its own executable)"))
	}
	if g.Token == "" {
		return GatewayProc{}, backends.Stalled(errors.New("sshfleet: gateway admin token is required"))
	}
	unlock := b.lock(id)
	defer unlock()
	r, ok := b.record(id)
	if !ok {
		return GatewayProc{}, fmt.Errorf("sshfleet: instance %s: %w", id, backends.ErrNotFound)
	}
	if r.Dir == "" || r.Arch == "" {
		return GatewayProc{}, backends.Transient(fmt.Errorf("sshfleet: instance %s: host not taken over yet", id))
	}
	if err := checkStatic(g.Binary); err != nil {
		return GatewayProc{}, backends.Stalled(fmt.Errorf("sshfleet: gateway binary: %w; run a hoist built with `CGO_ENABLED=0 go build ./cmd/hoist` or `go tool task build`", err))
	}
	if arch, err := elfArch(g.Binary); err != nil {
		return GatewayProc{}, backends.Stalled(fmt.Errorf("sshfleet: gateway binary: %w", err))
	} else if arch != r.Arch {
		return GatewayProc{}, backends.Stalled(fmt.Errorf("sshfleet: instance %s: %w: the host is %s but this server's hoist binary %s is %s; run the server on %s or give the gateway an instance type of %s",
			id, backends.ErrUnsupportedHost, r.Arch, g.Binary, arch, r.Arch, arch))
	}
	sum, err := b.sum(g.Binary)
	if err != nil {
		return GatewayProc{}, backends.Stalled(fmt.Errorf("sshfleet: gateway binary: %w", err))
	}
	st, err := os.Stat(g.Binary)
	if err != nil {
		return GatewayProc{}, backends.Stalled(fmt.Errorf("sshfleet: gateway binary: %w", err))
	}
	// The binary is large (all of hoist): the host keeps its SHA-256 and
	// size beside it, which the probe reads instead of hashing it again.
	binID := fmt.Sprintf("%s %d", sum, st.Size())
	c, err := b.client(ctx, r, true)
	if err != nil {
		return GatewayProc{}, err
	}
	log := b.log.With("instance", id)

	out, err := c.Run(ctx, gatewayProbe(r.Dir), nil)
	if err != nil {
		return GatewayProc{}, fmt.Errorf("sshfleet: probe gateway on %s: %w", id, err)
	}
	facts := keyValues(out)
	ip := facts["ip"]
	if net.ParseIP(ip) == nil {
		return GatewayProc{}, fmt.Errorf("sshfleet: instance %s: the host's own address is %q (from SSH_CONNECTION)", id, ip)
	}
	gdir := r.Dir + "/" + gatewayDir
	proc := GatewayProc{Socket: gdir + "/admin.sock", IP: ip}
	script := gatewaySupervisor(gatewayArgs(ip, g.HTTPPort, g.HTTPSPort))
	token := g.Token + "\n"
	if facts["state"] == "running" && facts["bin"] == binID && facts["token"] == sha256Hex(token) && facts["script"] == sha256Hex(script) {
		log.Debug("gateway_unchanged", "ip", ip)
		return proc, nil
	}

	files := []tarFile{
		{name: gatewayDir + "/token", data: []byte(token), mode: 0o600},
		{name: gatewayDir + "/supervise.sh", data: []byte(script), mode: 0o755},
	}
	if facts["bin"] != binID {
		files = append(files, tarFile{name: "bin/hoist", local: g.Binary, mode: 0o755}, tarFile{name: "bin/hoist.sum", data: []byte(binID + "\n"), mode: 0o644})
	}
	steps := int(gatewayStartWait / (50 * time.Millisecond))
	start := fmt.Sprintf(aliveFunc+`set -e
cd %[1]s
mkdir -p bin %[2]s/state
chmod 700 %[2]s
rm -rf .gateway.new && mkdir .gateway.new
tar -xf - -C .gateway.new
for f in $(cd .gateway.new && find . -type f); do mv -f ".gateway.new/$f" "$f"; done
rm -rf .gateway.new
set +e
cd %[2]s
%[3]s
if [ "$(id -u)" != 0 ]; then
  sudo -n setcap cap_net_bind_service=+ep ../bin/hoist 2>/dev/null || sudo -n sysctl -q -w net.ipv4.ip_unprivileged_port_start=%[5]d 2>/dev/null || echo "warning=cannot allow binding ports below 1024 (no passwordless sudo)"
fi
rm -f stop admin.sock
setsid sh ./supervise.sh </dev/null >/dev/null 2>&1 &
i=0; while [ ! -S admin.sock ] && [ $i -lt %[4]d ]; do sleep 0.05; i=$((i+1)); done
if [ -S admin.sock ]; then echo socket=yes; else echo socket=no; tail -n 20 gateway.log 2>/dev/null | sed 's/^/log=/'; fi
`, tunnel.Quote(r.Dir), gatewayDir, stopGatewayScript, steps, lowestPort(g.HTTPPort, g.HTTPSPort))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, files)) }()
	out, err = c.Run(ctx, start, pr)
	pr.Close()
	if err != nil {
		return GatewayProc{}, fmt.Errorf("sshfleet: start gateway on %s: %w", id, err)
	}
	var logTail []string
	res := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if k == "log" {
			logTail = append(logTail, v)
		} else {
			res[k] = v
		}
	}
	if w := res["warning"]; w != "" {
		log.Warn("gateway_ports_not_allowed", "warning", w)
	}
	if res["socket"] != "yes" {
		return GatewayProc{}, backends.Transient(fmt.Errorf("sshfleet: instance %s: the gateway did not open its admin socket within %s; its log ends: %s",
			id, gatewayStartWait, strings.Join(logTail, "\n")))
	}
	proc.Started = true
	log.Info("gateway_started", "ip", ip, "uploaded", facts["bin"] != binID, "previous", facts["state"])
	return proc, nil
}

// StopGatewayProcess stops the gateway on the host of instance id (SIGTERM
// to its supervisor, which passes it on and waits for the gateway to drain;
// killed after a bound) and removes its admin token. Not running, and an
// instance the backend no longer knows, is success; the gateway's state
// (its certificates) stays for the next start.
func (b *Backend) StopGatewayProcess(ctx context.Context, id string) error {
	unlock := b.lock(id)
	defer unlock()
	r, ok := b.record(id)
	if !ok || r.Dir == "" {
		return nil
	}
	c, err := b.client(ctx, r, true)
	if err != nil {
		return err
	}
	script := fmt.Sprintf(aliveFunc+`cd %s 2>/dev/null || exit 0
%s
rm -f token admin.sock`, tunnel.Quote(r.Dir+"/"+gatewayDir), stopGatewayScript)
	if _, err := c.Run(ctx, script, nil); err != nil {
		return fmt.Errorf("sshfleet: stop gateway on %s: %w", id, err)
	}
	b.log.Info("gateway_stopped", "instance", id)
	return nil
}

// stopGatewayScript stops the supervisor running in the current directory
// and its gateway: "stop" file, SIGTERM, a bounded wait for the drain, then
// SIGKILL of both.
var stopGatewayScript = fmt.Sprintf(`touch stop
s=$(cat supervisor.pid 2>/dev/null); g=$(cat gateway.pid 2>/dev/null)
if [ -n "$s" ]; then kill -TERM "$s" 2>/dev/null; fi
i=0; while { { [ -n "$s" ] && alive "$s"; } || { [ -n "$g" ] && alive "$g"; }; } && [ $i -lt %d ]; do sleep 0.1; i=$((i+1)); done
if [ -n "$s" ]; then kill -KILL "$s" 2>/dev/null; fi
if [ -n "$g" ]; then kill -KILL "$g" 2>/dev/null; fi
rm -f supervisor.pid gateway.pid`, int(gatewayStopWait/(100*time.Millisecond)))

// gatewayProbe prints what decides whether the gateway must be (re)started:
// the host's own address (the server end of the SSH connection), whether
// its supervisor runs, the SHA-256 (as recorded at upload) and size of the
// binary, and the SHA-256 of the token and script in place.
func gatewayProbe(dir string) string {
	return aliveFunc + `cd ` + tunnel.Quote(dir) + ` || exit 1
set -- $SSH_CONNECTION
echo "ip=$3"
echo "bin=$(cat bin/hoist.sum 2>/dev/null | cut -d' ' -f1) $(stat -c %s bin/hoist 2>/dev/null)"
echo "token=$(sha256sum ` + gatewayDir + `/token 2>/dev/null | cut -d' ' -f1)"
echo "script=$(sha256sum ` + gatewayDir + `/supervise.sh 2>/dev/null | cut -d' ' -f1)"
if [ -f ` + gatewayDir + `/supervisor.pid ] && alive "$(cat ` + gatewayDir + `/supervisor.pid)"; then echo state=running; else echo state=stopped; fi
`
}

// gatewayArgs are the `hoist gateway` flags the supervisor passes ($G is
// the gateway directory); a zero port disables that listener.
func gatewayArgs(ip string, httpPort, httpsPort int) string {
	listen := func(port int) string {
		if port == 0 {
			return `""`
		}
		return tunnel.Quote(net.JoinHostPort(ip, strconv.Itoa(port)))
	}
	return `--state-dir "$G/state" --admin-socket "$G/admin.sock" --token-file "$G/token" --http ` + listen(httpPort) + ` --https ` + listen(httpsPort)
}

// gatewaySupervisor keeps `hoist gateway` running in its directory and
// survives the SSH connection that started it (it runs under setsid), as
// supervisorScript does for the shim. Touching stop and SIGTERM end it.
func gatewaySupervisor(args string) string {
	return `#!/bin/sh
# hoist gateway supervisor, written by hoist (backends/sshfleet). Keeps
# bin/hoist gateway (next to the agents) running; "touch stop" and SIGTERM end it.
G=$(cd "$(dirname "$0")" && pwd) || exit 1
cd "$G" || exit 1
BIN=$(cd .. && pwd)/bin/hoist
echo $$ > supervisor.pid
child=
stop() {
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
  rm -f supervisor.pid gateway.pid
  exit 0
}
trap stop TERM INT HUP
while [ ! -f stop ]; do
  if [ -f gateway.log ] && [ "$(wc -c < gateway.log)" -gt 10485760 ]; then mv -f gateway.log gateway.log.1; fi
  "$BIN" gateway ` + args + ` >> gateway.log 2>&1 &
  child=$!
  echo "$child" > gateway.pid
  wait "$child"
  child=
  [ -f stop ] || sleep 1
done
rm -f supervisor.pid gateway.pid
`
}

// lowestPort returns the lowest of the non-zero ports (1024 when none is).
func lowestPort(ports ...int) int {
	low := 1024
	for _, p := range ports {
		if p > 0 && p < low {
			low = p
		}
	}
	return low
}

// keyValues parses key=value lines.
func keyValues(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			m[k] = v
		}
	}
	return m
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// elfArch returns the Go architecture of an ELF executable.
func elfArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("%s is built for %s, which hosts do not run", path, f.Machine)
}
