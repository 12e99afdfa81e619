package runner

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper collects the exit status of every child of the process, so that a
// runner running as PID 1 leaves no zombies behind. Processes the runner
// starts itself are started through it and their status is delivered on a
// channel; os/exec's Wait must not be used alongside it (see run).
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
	stop    chan struct{}
}

func newReaper() *reaper {
	r := &reaper{waiting: map[int]chan syscall.WaitStatus{}, stop: make(chan struct{})}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-sigs:
				r.reap()
			case <-r.stop:
				return
			}
		}
	}()
	return r
}

func (r *reaper) close() { close(r.stop) }

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

// run starts a helper command (nvidia-smi) and returns its standard output.
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
