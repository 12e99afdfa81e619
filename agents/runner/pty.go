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

// Terminal mode opcodes of RFC 4254 section 8 (and IUTF8, RFC 8160) mapped
// to the termios control characters and flags they set; modes without a
// Linux counterpart are ignored, as sshd ignores them.
var (
	ttyChars = map[byte]int{
		1: syscall.VINTR, 2: syscall.VQUIT, 3: syscall.VERASE, 4: syscall.VKILL, 5: syscall.VEOF,
		6: syscall.VEOL, 7: syscall.VEOL2, 8: syscall.VSTART, 9: syscall.VSTOP, 10: syscall.VSUSP,
		12: syscall.VREPRINT, 13: syscall.VWERASE, 14: syscall.VLNEXT, 18: syscall.VDISCARD,
	}
	ttyIflags = map[byte]uint32{
		30: syscall.IGNPAR, 31: syscall.PARMRK, 32: syscall.INPCK, 33: syscall.ISTRIP, 34: syscall.INLCR,
		35: syscall.IGNCR, 36: syscall.ICRNL, 37: syscall.IUCLC, 38: syscall.IXON, 39: syscall.IXANY,
		40: syscall.IXOFF, 41: syscall.IMAXBEL, 42: syscall.IUTF8,
	}
	ttyLflags = map[byte]uint32{
		50: syscall.ISIG, 51: syscall.ICANON, 52: syscall.XCASE, 53: syscall.ECHO, 54: syscall.ECHOE,
		55: syscall.ECHOK, 56: syscall.ECHONL, 57: syscall.NOFLSH, 58: syscall.TOSTOP, 59: syscall.IEXTEN,
		60: syscall.ECHOCTL, 61: syscall.ECHOKE, 62: syscall.PENDIN,
	}
	ttyOflags = map[byte]uint32{
		70: syscall.OPOST, 71: syscall.OLCUC, 72: syscall.ONLCR, 73: syscall.OCRNL, 74: syscall.ONOCR, 75: syscall.ONLRET,
	}
	ttyCflags = map[byte]uint32{90: syscall.CS7, 91: syscall.CS8, 92: syscall.PARENB, 93: syscall.PARODD}
)

// setModes applies the encoded terminal modes of a pty-req (RFC 4254
// section 8: opcode byte, uint32 value, until opcode 0) to the terminal f.
func setModes(f *os.File, modes []byte) error {
	var t syscall.Termios
	if err := ioctl(f, syscall.TCGETS, unsafe.Pointer(&t)); err != nil {
		return fmt.Errorf("TCGETS: %w", err)
	}
	set := func(flags *uint32, bit uint32, on bool) {
		if on {
			*flags |= bit
		} else {
			*flags &^= bit
		}
	}
	for len(modes) > 0 && modes[0] != 0 {
		op := modes[0]
		if op >= 160 || len(modes) < 5 {
			break // opcodes 160 to 255 take arguments not defined: stop
		}
		v := uint32(modes[1])<<24 | uint32(modes[2])<<16 | uint32(modes[3])<<8 | uint32(modes[4])
		modes = modes[5:]
		if i, ok := ttyChars[op]; ok {
			t.Cc[i] = uint8(v)
		} else if bit, ok := ttyIflags[op]; ok {
			set(&t.Iflag, bit, v != 0)
		} else if bit, ok := ttyLflags[op]; ok {
			set(&t.Lflag, bit, v != 0)
		} else if bit, ok := ttyOflags[op]; ok {
			set(&t.Oflag, bit, v != 0)
		} else if bit, ok := ttyCflags[op]; ok {
			if bit == syscall.CS7 || bit == syscall.CS8 {
				if v != 0 {
					t.Cflag = t.Cflag&^syscall.CSIZE | bit
				}
				continue
			}
			set(&t.Cflag, bit, v != 0)
		}
	}
	if err := ioctl(f, syscall.TCSETS, unsafe.Pointer(&t)); err != nil {
		return fmt.Errorf("TCSETS: %w", err)
	}
	return nil
}
