package shim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"hoist/agents/api"
)

// Network volumes. The server attaches a volume to the host through the
// provider's API and names the device it shows up as; the shim, before it
// creates the task's container, waits for the device, formats it when it has
// no file system (ext4, only for volumes hoist created), mounts it at
// StateDir/volumes/<name> and binds that directory into the container. Once
// the container has exited (or the task failed before it started) the shim
// unmounts it, so that the server can detach the volume. This follows
// dstack's shim (runner/internal/shim/docker.go: prepareVolumes,
// formatAndMountVolume, unmountVolumes), which mounts under /dstack-volumes.

// volumeDeviceWait bounds how long the shim waits for an attached volume's
// device to show up (the provider's attach returns before the guest's udev
// has made the link).
const volumeDeviceWait = 60 * time.Second

var validVolumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// checkNetworkVolume refuses a network volume whose name is no plain path
// component, whose device is outside /dev or whose path is not absolute.
func checkNetworkVolume(v api.NetworkVolume) error {
	if v.Claim != "" {
		return fmt.Errorf("network volume %s: claim %q: PersistentVolumeClaims are mounted by the Kubernetes backend, not by a host's shim", v.Name, v.Claim)
	}
	if !validVolumeName.MatchString(v.Name) {
		return fmt.Errorf("network volume name %q must match %s", v.Name, validVolumeName)
	}
	if !strings.HasPrefix(v.DevicePath, "/dev/") || filepath.Clean(v.DevicePath) != v.DevicePath {
		return fmt.Errorf("network volume %s: device %q is not a clean path below /dev", v.Name, v.DevicePath)
	}
	if !filepath.IsAbs(v.Path) || filepath.Clean(v.Path) != v.Path || v.Path == "/" {
		return fmt.Errorf("network volume %s: path %q must be absolute, clean and not /", v.Name, v.Path)
	}
	return nil
}

// volumeDir is where the shim mounts network volume name on the host.
func (s *Shim) volumeDir(name string) string {
	return filepath.Join(s.cfg.StateDir, "volumes", name)
}

// mountVolumes mounts the spec's network volumes on the host and returns
// the container binds for them. On error the volumes it mounted stay
// mounted; the caller unmounts them with unmountVolumes.
func (s *Shim) mountVolumes(ctx context.Context, spec api.TaskSpec) ([]string, error) {
	var binds []string
	for _, v := range spec.NetworkVolumes {
		if err := s.mountVolume(ctx, v); err != nil {
			return nil, fmt.Errorf("network volume %s: %w", v.Name, err)
		}
		b := s.volumeDir(v.Name) + ":" + v.Path
		if v.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	return binds, nil
}

func (s *Shim) mountVolume(ctx context.Context, v api.NetworkVolume) error {
	dir := s.volumeDir(v.Name)
	dev, err := waitDevice(ctx, v.DevicePath)
	if err != nil {
		return err
	}
	if src, ok, err := mountSource(dir); err != nil {
		return err
	} else if ok {
		// Still mounted (the shim restarted, or another task of this host
		// uses the volume): the same device is fine.
		if src != dev {
			return fmt.Errorf("%s is mounted from %s, not %s", dir, src, dev)
		}
		return nil
	}
	fsType, err := fileSystem(ctx, dev)
	if err != nil {
		return err
	}
	created := false
	if fsType == "" {
		if !v.InitFS {
			return fmt.Errorf("%s (%s) has no file system, and the volume was registered, not created by hoist: format it first", v.DevicePath, dev)
		}
		s.log.Info("volume_formatting", "volume", v.Name, "device", dev)
		if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-F", "-q", dev).CombinedOutput(); err != nil {
			return fmt.Errorf("mkfs.ext4 %s: %w: %s", dev, err, strings.TrimSpace(string(out)))
		}
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "mount", dev, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %s on %s: %w: %s", dev, dir, err, strings.TrimSpace(string(out)))
	}
	if created {
		// Any container user may write to a file system hoist made (dstack
		// does the same; mke2fs's root_perms is too new to rely on); a
		// user's own file system keeps its permissions.
		if err := os.Chmod(dir, 0o777); err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
	}
	s.log.Info("volume_mounted", "volume", v.Name, "device", dev, "dir", dir, "fs", fsType, "formatted", created)
	return nil
}

// volumeReleaseWait bounds how long RemoveTask waits, after unmounting, for
// a volume's device to be free: a mount namespace that still holds a copy of
// the mount (a container being torn down) keeps the file system alive and
// its last writes unflushed, and a detach then would lose them.
const volumeReleaseWait = 5 * time.Second

// unmountVolumes unmounts the network volumes of task t that no other live
// task of this shim uses. With wait (the task's container is gone) it then
// waits until no mount anywhere holds the device, and fails when one still
// does, so that the server does not detach a live file system.
func (s *Shim) unmountVolumes(t *task, wait bool) error {
	s.mu.Lock()
	var vols []api.NetworkVolume
	for _, v := range t.spec.NetworkVolumes {
		inUse := false
		for _, o := range s.tasks {
			if o == t || o.info.Terminated() {
				continue
			}
			for _, ov := range o.spec.NetworkVolumes {
				inUse = inUse || ov.Name == v.Name
			}
		}
		if !inUse {
			vols = append(vols, v)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, v := range vols {
		dir := s.volumeDir(v.Name)
		dev, mounted, err := mountSource(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mounted {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("umount %s: %w: %s", dir, err, strings.TrimSpace(string(out))))
				continue
			}
			s.log.Info("volume_unmounted", "volume", v.Name, "dir", dir)
		} else if dev, err = filepath.EvalSymlinks(v.DevicePath); err != nil {
			continue // detached already: nothing can hold it here
		}
		if wait {
			if err := waitReleased(dev, volumeReleaseWait); err != nil {
				errs = append(errs, fmt.Errorf("network volume %s: %w", v.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// waitReleased waits up to limit until block device dev can be opened
// exclusively, which the kernel refuses (EBUSY) while a mounted file system,
// in any mount namespace, holds it.
func waitReleased(dev string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_EXCL, 0)
		if err == nil {
			return f.Close()
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("device %s: %w", dev, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("device %s is still mounted %s after the task's unmount (another mount namespace holds it): %w", dev, limit, errConflict)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDevice resolves path's symbolic links to a block device below /dev,
// waiting up to volumeDeviceWait for it to appear.
func waitDevice(ctx context.Context, path string) (string, error) {
	deadline := time.Now().Add(volumeDeviceWait)
	for {
		dev, err := filepath.EvalSymlinks(path)
		if err == nil {
			if !strings.HasPrefix(dev, "/dev/") {
				return "", fmt.Errorf("%s resolves to %s, outside /dev", path, dev)
			}
			fi, err := os.Stat(dev)
			if err != nil {
				return "", fmt.Errorf("device: %w", err)
			}
			if fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
				return "", fmt.Errorf("%s (%s) is not a block device", path, dev)
			}
			return dev, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("device: %w", err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("device %s did not appear within %s", path, volumeDeviceWait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// fileSystem returns the type of the file system on dev, "" when it has
// none. blkid exits 2 when it finds nothing.
func fileSystem(ctx context.Context, dev string) (string, error) {
	out, err := exec.CommandContext(ctx, "blkid", "--probe", "--output", "value", "--match-tag", "TYPE", dev).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("blkid %s: %w", dev, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// mountSource reports whether dir is a mount point and, if so, the device
// mounted there (from /proc/self/mountinfo).
func mountSource(dir string) (string, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	src, found := "", false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMount(fields[4]) != dir {
			continue
		}
		found, src = true, ""
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				src = unescapeMount(fields[i+2])
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", false, fmt.Errorf("mounts: %w", err)
	}
	return src, found, nil // the last mount on dir is the one seen there
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var n int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &n); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
