package runner

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair (see pty(7)). The master stays in
// non-blocking mode, registered with Go's poller, so that closing it ends
// a Read blocked in another goroutine; every ioctl on it goes through
// SyscallConn for that reason (File.Fd would switch it to blocking mode).
// The slave is opened without becoming the runner's controlling terminal.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty: TIOCGPTN: %w", err)
	}
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty: TIOCSPTLCK: %w", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	return master, slave, nil
}

// winsize is the kernel's struct winsize (see ioctl_tty(2)).
type winsize struct {
	rows, cols, xpixel, ypixel uint16
}

// setWinsize sets the terminal size of the pty whose master is f; the
// kernel signals SIGWINCH to the terminal's foreground process group.
func setWinsize(f *os.File, cols, rows, xpixel, ypixel uint32) error {
	ws := winsize{rows: clampUint16(rows), cols: clampUint16(cols), xpixel: clampUint16(xpixel), ypixel: clampUint16(ypixel)}
	return ioctl(f, syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
}

func clampUint16(v uint32) uint16 { return uint16(min(v, 0xffff)) }

// ioctl runs ioctl(2) on f's descriptor without taking it out of
// non-blocking mode.
func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := sc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
