package shim

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// RunnerLibDir is where the shim bind-mounts the ELF interpreter and shared
// libraries of a dynamically linked runner binary inside the container.
const RunnerLibDir = "/hoist/lib"

// runnerLaunch is how the container starts the runner binary: its
// entrypoint (the runner itself, or its ELF interpreter followed by the
// runner) and the bind mounts that makes necessary.
type runnerLaunch struct {
	entrypoint []string
	binds      []string
}

// runnerLaunch returns how containers start the runner binary, worked out
// on the first task's start.
func (s *Shim) runnerLaunch() (runnerLaunch, error) {
	s.launchOnce.Do(func() { s.launch, s.launchErr = launchFor(s.cfg.RunnerBinary) })
	return s.launch, s.launchErr
}

// launchFor returns how to start bin at RunnerPath in a container. A static
// binary is the entrypoint itself. A dynamically linked one (a hoist built
// with cgo) cannot use the image's C library, if the image has one at all:
// its interpreter and the shared libraries it needs (transitively) are
// bind-mounted read-only from this host into RunnerLibDir, and the
// interpreter runs it explicitly with that library path ("ld.so [options]
// program [args]", see ld.so(8)); the job's own processes are untouched.
func launchFor(bin string) (runnerLaunch, error) {
	interp, needed, err := elfDeps(bin)
	if err != nil {
		return runnerLaunch{}, fmt.Errorf("runner binary %s: %w", bin, err)
	}
	if interp == "" {
		return runnerLaunch{entrypoint: []string{RunnerPath}}, nil
	}
	interpDir := filepath.Dir(interp)
	if real, err := filepath.EvalSymlinks(interp); err == nil {
		interpDir = filepath.Dir(real)
	}
	dirs := []string{interpDir}
	for _, g := range []string{"/lib/*-linux-gnu", "/usr/lib/*-linux-gnu"} {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
	inContainer := path.Join(RunnerLibDir, filepath.Base(interp))
	l := runnerLaunch{
		entrypoint: []string{inContainer, "--library-path", RunnerLibDir, RunnerPath},
		binds:      []string{interp + ":" + inContainer + ":ro"},
	}
	seen := map[string]bool{filepath.Base(interp): true}
	for len(needed) > 0 {
		name := needed[0]
		needed = needed[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		p := findLib(name, dirs)
		if p == "" {
			return runnerLaunch{}, fmt.Errorf("runner binary %s needs %s, not found in %v; use a static runner (CGO_ENABLED=0)", bin, name, dirs)
		}
		l.binds = append(l.binds, p+":"+path.Join(RunnerLibDir, name)+":ro")
		_, more, err := elfDeps(p)
		if err != nil {
			return runnerLaunch{}, fmt.Errorf("runner library %s: %w", p, err)
		}
		needed = append(needed, more...)
	}
	return l, nil
}

// elfDeps returns the ELF interpreter of the file at p ("" for a static
// executable) and the shared libraries it names as needed.
func elfDeps(p string) (interp string, needed []string, err error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", nil, fmt.Errorf("read the ELF interpreter: %w", err)
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		interp = string(b)
	}
	needed, err = f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", nil, fmt.Errorf("read the needed libraries: %w", err)
	}
	return interp, needed, nil
}

// findLib returns the first regular file (after symlinks) named name in dirs.
func findLib(name string, dirs []string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
