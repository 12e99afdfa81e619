package runner

import (
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// reaper collects the exit status of every child of the process, so that a
// runner running as PID 1 leaves no zombies behind. There is one per process
// (sharedReaper). Processes the runner
// starts itself are started through it and their status is delivered on a
// channel; os/exec's Wait must not be used alongside it (see run).
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
}

var (
	processReaper     *reaper
	processReaperOnce sync.Once
)

// sharedReaper returns the process's one reaper: waiting for any child is
// process-wide, so two reapers would steal each other's children.
func sharedReaper() *reaper {
	processReaperOnce.Do(func() { processReaper = newReaper() })
	return processReaper
}

func newReaper() *reaper {
	r := &reaper{waiting: map[int]chan syscall.WaitStatus{}}
	// Orphans of the job become the runner's children (as they are anyway
	// when it is PID 1), so that they are reaped at once.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for range sigs {
			r.reap()
		}
	}()
	return r
}

// reap collects every exited child without blocking.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			delete(r.waiting, pid)
			ch <- ws
		}
	}
}

// start starts a process and returns a channel that receives its exit
// status. The reaper's lock is held across the start so that the child
// cannot be reaped before it is registered.
func (r *reaper) start(name string, argv []string, attr *os.ProcAttr) (*os.Process, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := os.StartProcess(name, argv, attr)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiting[p.Pid] = ch
	return p, ch, nil
}

// run starts a helper command (nvidia-smi, amd-smi) and returns its standard output.
func (r *reaper) run(name string, args ...string) ([]byte, error) {
	path, err := lookPath(name)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		return nil, err
	}
	defer devnull.Close()
	_, done, err := r.start(path, append([]string{path}, args...), &os.ProcAttr{Files: []*os.File{devnull, pw, devnull}})
	pw.Close()
	if err != nil {
		return nil, err
	}
	out, rerr := readAllLimit(pr, 1<<20)
	ws := <-done
	if rerr != nil {
		return nil, rerr
	}
	if ws.ExitStatus() != 0 {
		return out, &exitError{code: ws.ExitStatus()}
	}
	return out, nil
}

// groupAlive reports whether process group pgid has a live (not zombie) member.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid && pid != 0 {
			return true
		}
	}
	return false
}
