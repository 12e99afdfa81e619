package sim

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v4"
	"golang.org/x/crypto/ssh"

	"hoist/e2e/internal/sshd"
)

// VMEnv is the environment variable sshd sets in every session on a
// simulated VM, to the VM's state directory: Halt kills every process that
// carries it, so what a driver started on the VM (the shim under setsid)
// goes with the VM.
const VMEnv = "CLOUDSIM_VM"

// SSHPort is the port a VM's sshd listens on.
const SSHPort = 22

// Addresses of VMs are drawn from 127.77.0.0/16, away from the 127.0.0.x
// addresses the SSH-fleet tests use (e2e/sshfleet_test.go,
// backends/sshfleet/sshfleet_test.go).
const addrPrefix = "127.77."

// ErrClosed says the simulator is stopping: Boot refuses.
var ErrClosed = errors.New("sim: closed")

// A vm is a booting or running VM: its sshd and what runs under it.
type vm struct {
	s            *Sim
	provider, id string
	dir          string
	user         string
	stuck        bool // never boots (Faults.Stuck)
	mu           sync.Mutex
	addr         string
	proc         *sshd.Process
	stopped      bool
	stop         chan struct{}
	done         chan struct{} // closed when the boot goroutine returns
}

// Boot starts the VM of instance resource id: it gets its own 127.x
// address and an sshd on port 22 accepting only r.AuthorizedKeys and the
// ssh_authorized_keys of a #cloud-config r.UserData, for r.User (any user
// that exists here when r.User is empty); the resource goes from pending to
// running once sshd answers. Address and HostKeys are set before Boot
// returns; sshd starts in the background after Config.BootDelay. Booting a
// VM that is booting or running does nothing.
func (s *Sim) Boot(provider, id string) error {
	r, ok := s.Get(provider, id)
	if !ok {
		return fmt.Errorf("%w: %s %s", ErrNotFound, provider, id)
	}
	if r.Kind != KindInstance {
		return fmt.Errorf("sim: boot %s %s: a %s, not an instance", provider, id, r.Kind)
	}
	if r.State == StateTerminated {
		return fmt.Errorf("sim: boot %s %s: terminated", provider, id)
	}
	return s.boot(r, s.stuck(r.InstanceType))
}

// boot starts r's VM (see Boot); a stuck one stays pending.
func (s *Sim) boot(r Resource, stuck bool) error {
	k := key(r.Provider, r.ID)
	s.vmu.Lock()
	if s.closed {
		s.vmu.Unlock()
		return ErrClosed
	}
	if _, ok := s.vms[k]; ok {
		s.vmu.Unlock()
		return nil
	}
	v := &vm{s: s, provider: r.Provider, id: r.ID, user: r.User, dir: s.vmDir(r.Provider, r.ID), stuck: stuck,
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		s.vmu.Unlock()
		return err
	}
	// What an earlier run of this VM left (a simulator that was killed
	// rather than stopped) goes first, freeing its address.
	killLeftovers(v.dir)
	pub, err := hostKey(filepath.Join(v.dir, "ssh_host_ed25519_key"))
	if err != nil {
		s.vmu.Unlock()
		return err
	}
	var auth bytes.Buffer
	for _, l := range authorizedKeys(r) {
		auth.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join(v.dir, "authorized_keys"), auth.Bytes(), 0o600); err != nil {
		s.vmu.Unlock()
		return err
	}
	v.addr = r.Address
	if v.addr == "" || !s.addrFreeLocked(v.addr, k) {
		if v.addr, err = s.allocLocked(k); err != nil {
			s.vmu.Unlock()
			return err
		}
	}
	s.vms[k] = v
	s.vmu.Unlock()
	if _, err := s.Update(r.Provider, r.ID, func(r *Resource) error {
		if r.State == StateTerminated { // halted meanwhile
			return fmt.Errorf("sim: boot %s %s: terminated", r.Provider, r.ID)
		}
		r.Address, r.HostKeys, r.State, r.Message = v.addr, []string{pub}, StatePending, ""
		return nil
	}); err != nil {
		s.vmu.Lock()
		if s.vms[k] == v {
			delete(s.vms, k)
		}
		s.vmu.Unlock()
		close(v.done)
		return err
	}
	s.cfg.Logger.Info("vm_boot", "provider", r.Provider, "id", r.ID, "address", v.addr)
	go v.run()
	return nil
}

// Halt stops the VM of instance id (its sshd and every process started
// through it) and marks it terminated. Halting a terminated VM does nothing.
func (s *Sim) Halt(provider, id string) error {
	k := key(provider, id)
	s.vmu.Lock()
	v := s.vms[k]
	delete(s.vms, k)
	s.vmu.Unlock()
	if v != nil {
		v.halt()
		s.cfg.Logger.Info("vm_halt", "provider", provider, "id", id, "address", v.addr)
	}
	now := s.cfg.Now().UTC()
	_, err := s.Update(provider, id, func(r *Resource) error {
		if r.State != StateTerminated {
			r.State, r.TerminatedAt = StateTerminated, &now
		}
		return nil
	})
	return err
}

// Reclaim is the common part of a provider's Interrupt: it marks spot
// instance id interrupted and halts it.
func (s *Sim) Reclaim(provider, id string) error {
	if _, err := s.Update(provider, id, func(r *Resource) error {
		if r.Kind != KindInstance {
			return fmt.Errorf("sim: interrupt %s %s: a %s, not an instance", provider, id, r.Kind)
		}
		r.Interrupted = true
		return nil
	}); err != nil {
		return err
	}
	return s.Halt(provider, id)
}

// Find returns the resources with id, of every provider.
func (s *Sim) Find(id string) []Resource {
	var out []Resource
	for _, r := range s.List("", "") {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

func (s *Sim) vmDir(provider, id string) string {
	clean := func(x string) string {
		return strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == 0 {
				return '_'
			}
			return r
		}, x)
	}
	return filepath.Join(s.cfg.StateDir, "vms", clean(provider), clean(id))
}

// addrFreeLocked says whether addr may be (re)used by VM k: no other
// resource has it and nothing listens on its port 22. s.vmu is held.
func (s *Sim) addrFreeLocked(addr, k string) bool {
	for _, r := range s.List("", "") {
		if r.Address == addr && key(r.Provider, r.ID) != k {
			return false
		}
	}
	for vk, v := range s.vms {
		if vk != k && v.address() == addr {
			return false
		}
	}
	return probe(addr) == nil
}

// allocLocked picks a free address in 127.77.0.0/16 for VM k, never one a
// resource of this simulator ever had (a new VM with an old VM's address and
// another host key would look like a man in the middle). s.vmu is held.
func (s *Sim) allocLocked(k string) (string, error) {
	used := map[string]bool{}
	for _, r := range s.List("", "") {
		used[r.Address] = true
	}
	for _, v := range s.vms {
		used[v.address()] = true
	}
	var last error
	for range 200 {
		n := 256 + mathrand.IntN(65536-512) // skip 127.77.0.x and 127.77.255.x
		if n%256 == 0 || n%256 == 255 {
			continue
		}
		a := addrPrefix + strconv.Itoa(n/256) + "." + strconv.Itoa(n%256)
		if used[a] {
			continue
		}
		if last = probe(a); last == nil {
			return a, nil
		}
		if errors.Is(last, syscall.EACCES) {
			return "", fmt.Errorf("sim: VMs listen on port %d, which needs root: %w", SSHPort, last)
		}
	}
	return "", fmt.Errorf("sim: no free address in %s0.0/16: %w", addrPrefix, last)
}

// probe checks that addr:22 can be listened on.
func probe(addr string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(SSHPort)))
	if err != nil {
		return err
	}
	return ln.Close()
}

func (v *vm) address() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.addr
}

// run boots the VM: it waits the boot delay, starts sshd (on a new address
// when another process took this one meanwhile) and marks the instance
// running once sshd accepts connections.
func (v *vm) run() {
	defer close(v.done)
	s := v.s
	if v.stuck {
		<-v.stop
		return
	}
	select {
	case <-v.stop:
		return
	case <-time.After(s.cfg.BootDelay):
	}
	var err error
	for attempt := 0; ; attempt++ {
		if err = v.start(); err == nil || !errors.Is(err, errAddrTaken) || attempt == 4 {
			break
		}
		// Another process took the address between probe and bind.
		s.vmu.Lock()
		addr, aerr := s.allocLocked(key(v.provider, v.id))
		s.vmu.Unlock()
		if aerr != nil {
			err = aerr
			break
		}
		v.mu.Lock()
		v.addr = addr
		v.mu.Unlock()
		if _, uerr := s.Update(v.provider, v.id, func(r *Resource) error { r.Address = addr; return nil }); uerr != nil {
			err = uerr
			break
		}
	}
	v.mu.Lock()
	stopped := v.stopped
	v.mu.Unlock()
	if stopped {
		return
	}
	if err != nil {
		s.cfg.Logger.Error("vm_boot_failed", "provider", v.provider, "id", v.id, "err", err)
		_, _ = s.Update(v.provider, v.id, func(r *Resource) error { r.Message = err.Error(); return nil })
		return
	}
	_, _ = s.Update(v.provider, v.id, func(r *Resource) error {
		if r.State == StatePending {
			r.State = StateRunning
		}
		return nil
	})
}

// start writes the sshd_config and starts sshd, waiting until it listens.
func (v *vm) start() error {
	v.mu.Lock()
	addr := v.addr
	v.mu.Unlock()
	c := sshd.Config{
		IP:             addr,
		Port:           SSHPort,
		HostKey:        filepath.Join(v.dir, "ssh_host_ed25519_key"),
		AuthorizedKeys: filepath.Join(v.dir, "authorized_keys"),
		// sshd's own PID file, only so that it does not write the
		// system's: killLeftovers reads listenerPIDFile instead.
		PidFile: filepath.Join(v.dir, "sshd.pid"),
		// Every simulated VM logs in as a user of this machine; HOME is
		// the VM's own directory, so what a driver leaves in the home
		// directory (hoist's ~/.hoist/<instance>) goes with the VM's
		// state instead of piling up in this machine's.
		SetEnv: map[string]string{VMEnv: v.dir, "HOME": filepath.Join(v.dir, "home")},
	}
	if err := os.MkdirAll(filepath.Join(v.dir, "home"), 0o700); err != nil {
		return err
	}
	if v.user != "" {
		c.AllowUsers = []string{v.user}
	}
	cfg := filepath.Join(v.dir, "sshd_config")
	if err := c.Write(cfg); err != nil {
		return err
	}
	logPath := filepath.Join(v.dir, "sshd.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // sshd has its own descriptor
	fi, err := logf.Stat()
	if err != nil {
		return err
	}
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return nil
	}
	p, err := sshd.Start(cfg, logf)
	if err != nil {
		v.mu.Unlock()
		return err
	}
	// Recorded before sshd may listen, so that once the VM is running a
	// simulator over the same state finds it (see listenerPIDFile).
	if err := writeFileAtomic(filepath.Join(v.dir, listenerPIDFile), []byte(strconv.Itoa(p.PID())+"\n"), 0o600); err != nil {
		v.mu.Unlock()
		p.Kill()
		return err
	}
	v.proc = p
	v.mu.Unlock()
	if err := p.WaitListening(c.Addr(), 10*time.Second); err != nil {
		p.Kill()
		// What sshd said this time (sshd -t is not run first: the config
		// is ours, and it would double the processes a boot starts).
		var said string
		if b, rerr := os.ReadFile(logPath); rerr == nil && int64(len(b)) > fi.Size() {
			said = tail(b[fi.Size():], 400)
		}
		if strings.Contains(said, "Cannot bind any address") {
			return fmt.Errorf("%w: %s", errAddrTaken, said)
		}
		if said != "" {
			return fmt.Errorf("%w: %s", err, said)
		}
		return err
	}
	return nil
}

// errAddrTaken says sshd could not listen on the VM's address.
var errAddrTaken = errors.New("sim: the VM's address is taken")

// halt stops the boot, sshd and every process started through it.
func (v *vm) halt() {
	v.mu.Lock()
	if !v.stopped {
		v.stopped = true
		close(v.stop)
	}
	v.mu.Unlock()
	<-v.done
	v.mu.Lock()
	p := v.proc
	v.mu.Unlock()
	if p != nil {
		for _, pid := range sshd.Descendants(p.PID(), nil) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		p.Kill()
	}
	killTagged(v.dir)
	removePIDFiles(v.dir)
}

// listenerPIDFile, in a VM's directory, holds the PID of its sshd listener,
// written (atomically) by the simulator that started it. sshd's own PidFile
// will not do: sshd writes it only after binding its listening socket, and
// not atomically (OpenSSH sshd.c: fopen, fprintf, fclose once the listen
// sockets are bound), so a simulator reading it may find it missing or
// empty while the address is already taken, and move the VM.
const listenerPIDFile = "listener.pid"

// removePIDFiles removes the PID files of the VM in dir: a VM stopped by
// halt leaves nothing for the next simulator to kill.
func removePIDFiles(dir string) {
	_ = os.Remove(filepath.Join(dir, listenerPIDFile))
	_ = os.Remove(filepath.Join(dir, "sshd.pid"))
}

// killLeftovers kills the sshd an earlier run of the VM in dir started
// (listenerPIDFile, if that process still runs sshd over dir's
// sshd_config), with its process group and descendants, waiting until they
// have exited and so freed the VM's address, and the processes started on
// it. The PID file is there only when a simulator was killed with the VM
// booted (halt removes it).
func killLeftovers(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, listenerPIDFile))
	if err != nil {
		return // never ran, or stopped by halt
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 1 && runsSSHD(pid, filepath.Join(dir, "sshd_config")) {
		// On timeout the address stays taken and boot moves the VM.
		_ = sshd.KillTree(pid, nil, 10*time.Second)
	}
	killTagged(dir)
	removePIDFiles(dir)
}

// runsSSHD says whether process pid is an sshd over config (and not
// another process that got the PID of one long gone). The listener rewrites
// its command line in place to show its state (OpenSSH setproctitle: "sshd:
// ... [listener] N of 10-100 startups"), so a read that races the rewrite is
// tried again.
func runsSSHD(pid int, config string) bool {
	for range 3 {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return false
		}
		if bytes.Contains(cmdline, []byte(config)) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// killTagged kills every process whose environment has VMEnv=tag, until
// none is left (a supervisor may restart what it watches meanwhile, and a
// killed process keeps its environment until it has exited), for at most
// 10 s.
func killTagged(tag string) {
	want := []byte(VMEnv + "=" + tag + "\x00")
	self := os.Getpid()
	clean := 0
	for range 500 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(append([]byte{0}, b...), append([]byte{0}, want...)) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			found = true
		}
		// A process caught in exec has no environ to read yet: only a
		// second clean scan shows none is left.
		switch {
		case found:
			clean = 0
		case clean == 1:
			return
		default:
			clean++
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail returns the last n bytes of b, trimmed.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// hostKey returns the public half (authorized_keys form) of the ed25519
// host key in path, generating it first when there is none.
func hostKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			return "", gerr
		}
		blk, gerr := ssh.MarshalPrivateKey(priv, "")
		if gerr != nil {
			return "", gerr
		}
		b = pem.EncodeToMemory(blk)
		if err = writeFileAtomic(path, b, 0o600); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return "", fmt.Errorf("sim: host key %s: %w", path, err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), nil
}

// authorizedKeys returns the valid authorized_keys lines of r: its
// AuthorizedKeys and the ssh_authorized_keys of its #cloud-config user data.
func authorizedKeys(r Resource) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range append(append([]string{}, r.AuthorizedKeys...), CloudConfigKeys(r.UserData, r.User)...) {
		for _, line := range strings.Split(l, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || seen[line] {
				continue
			}
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
				continue
			}
			seen[line] = true
			out = append(out, line)
		}
	}
	return out
}

// CloudConfigKeys returns the SSH keys a #cloud-config user data (plain or
// base64, as EC2 carries it) authorizes: its top-level ssh_authorized_keys
// (the default user's, as dstack's get_user_data writes them) and those of
// its users entry named user
// (https://cloudinit.readthedocs.io/en/latest/reference/modules.html#users-and-groups).
func CloudConfigKeys(userData, user string) []string {
	ud := strings.TrimSpace(userData)
	if !strings.HasPrefix(ud, "#cloud-config") {
		b, err := base64.StdEncoding.DecodeString(ud)
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), "#cloud-config") {
			return nil
		}
		ud = strings.TrimSpace(string(b))
	}
	var cc struct {
		Keys  []string `yaml:"ssh_authorized_keys"`
		Users []any    `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(ud), &cc); err != nil {
		return nil
	}
	out := cc.Keys
	for _, u := range cc.Users {
		m, ok := u.(map[string]any)
		if !ok || m["name"] != user {
			continue
		}
		ks, _ := m["ssh_authorized_keys"].([]any)
		for _, k := range ks {
			if k, ok := k.(string); ok {
				out = append(out, k)
			}
		}
	}
	return out
}
