package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsJoinedEnv marks the process that HoldNetns re-executed after joining
// the namespace, so that a join that did not take is an error, not a loop.
const netnsJoinedEnv = "HOIST_RUNNER_NETNS_JOINED"

// HoldNetns makes this process a member of the network namespace bound at
// path and then waits until ctx ends or SIGTERM or SIGINT arrives. It is the
// runner's `--hold-netns` mode: the shim's namespace holder container
// (agents/shim, netns.go) runs it so that Docker can put a job container
// into that namespace with NetworkMode "container:<holder>", which joins
// the holder's main process's namespace.
//
// setns(2) moves only the calling thread, and /proc/PID/ns/net (what Docker
// joins) is the main thread's: so the thread that joined re-executes the
// process (execve(2) from any thread keeps the PID and the caller's
// namespaces), with the same command line, which then finds itself in the
// namespace and waits. It needs CAP_SYS_ADMIN.
func HoldNetns(ctx context.Context, path string) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	in, err := sameNetns("/proc/self/ns/net", path)
	if err != nil {
		return err
	}
	if !in {
		if os.Getenv(netnsJoinedEnv) != "" {
			return fmt.Errorf("hold netns %s: still outside it after joining", path)
		}
		return joinAndReexec(path)
	}
	select {
	case <-ctx.Done():
	case <-sigs:
	}
	return nil
}

// joinAndReexec joins the network namespace at path on a thread of its own
// and re-executes the process from that thread; it returns only on failure.
func joinAndReexec(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("hold netns: %w", err)
	}
	defer f.Close()
	cmdline, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		return fmt.Errorf("hold netns: %w", err)
	}
	// The whole command line, the ELF interpreter's options included when
	// the shim starts the runner through one (see agents/shim, loader.go),
	// and /proc/self/exe, which is that interpreter then.
	argv := strings.Split(string(bytes.TrimSuffix(cmdline, []byte{0})), "\x00")
	env := append(os.Environ(), netnsJoinedEnv+"=1")
	// The thread stays locked: it is in the namespace, and exec ends
	// every other thread.
	runtime.LockOSThread()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("hold netns: setns %s: %w", path, err)
	}
	err = syscall.Exec("/proc/self/exe", argv, env)
	return fmt.Errorf("hold netns: re-execute: %w", err)
}

// sameNetns reports whether the namespace files a and b are the same
// namespace (the same nsfs inode).
func sameNetns(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("hold netns: %w", err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("hold netns: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(b, &fs); err != nil {
		return false, fmt.Errorf("hold netns: %w", err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		return false, errors.New("hold netns: " + b + " is no namespace file")
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
