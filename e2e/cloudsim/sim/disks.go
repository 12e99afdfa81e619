package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Simulated network disks. A volume resource's data is a sparse file under
// the state dir (disks/<provider>/<id>.img). Attaching it to a VM sets up a
// loop device (losetup --find --show) and a symlink at the device path the
// provider documents and its driver returns, pointing at the loop device:
//
//   - AWS: /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol<id without
//     dash>, the NVMe serial by which dstack's shim finds an EBS volume
//     (runner/internal/shim/backends/aws.go);
//   - GCP: /dev/disk/by-id/google-<deviceName> (Compute Engine's udev rules,
//     https://cloud.google.com/compute/docs/disks/format-mount-disk-linux);
//   - Azure: /dev/disk/azure/scsi1/lun<N> (the azure-vm-utils udev rules,
//     https://learn.microsoft.com/azure/virtual-machines/linux/azure-to-guest-disk-mapping).
//
// Every simulated VM runs on this host, so the shim that serves a VM sees the
// disk where a real VM's shim would. The loop device and the link are
// recorded in the resource's Extra (ExtraLoop, ExtraLink) so that a detach
// after a simulator restart, or DetachAllDisks, can undo them. This needs
// root and loop devices.

// Extra keys kept on an attached volume resource.
const (
	// ExtraLoop is the loop device backing an attached volume.
	ExtraLoop = "loop_device"
	// ExtraLink is the device path symlink made for an attached volume.
	ExtraLink = "device_link"
)

// defaultDiskGB sizes a disk whose resource has no SizeGB.
const defaultDiskGB = 1

// DiskFile returns the path of volume id's data file.
func (s *Sim) DiskFile(provider, id string) string {
	return filepath.Join(s.cfg.StateDir, "disks", provider, id+".img")
}

// CreateDisk makes volume resource id's data file, a sparse file of the
// resource's SizeGB, if it does not exist yet. AttachDisk calls it, so a
// provider need not.
func (s *Sim) CreateDisk(provider, id string) error {
	r, ok := s.Get(provider, id)
	if !ok {
		return fmt.Errorf("sim: create disk %s %s: not found", provider, id)
	}
	if r.Kind != KindVolume {
		return fmt.Errorf("sim: create disk %s %s: a %s, not a volume", provider, id, r.Kind)
	}
	if s.cfg.StateDir == "" {
		return fmt.Errorf("sim: create disk %s %s: the simulator has no state dir", provider, id)
	}
	file := s.DiskFile(provider, id)
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("sim: create disk: %w", err)
	}
	gb := r.SizeGB
	if gb <= 0 {
		gb = defaultDiskGB
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("sim: create disk: %w", err)
	}
	err = f.Truncate(int64(gb) << 30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(file)
		return fmt.Errorf("sim: create disk: %w", err)
	}
	return nil
}

// AttachDisk attaches volume volumeID to instance instanceID: its data file
// (created on first attach) gets a loop device, and devicePath (under /dev)
// becomes a symlink to it. The resource records the attachment (AttachedTo,
// Device, State in-use, Extra loop device and link). Attaching again to the
// same instance at the same path is a no-op; a volume attached elsewhere is
// an error, which the provider maps to its own "in use" error.
func (s *Sim) AttachDisk(provider, volumeID, instanceID, devicePath string) error {
	if err := checkDevicePath(devicePath); err != nil {
		return err
	}
	r, ok := s.Get(provider, volumeID)
	if !ok {
		return fmt.Errorf("sim: attach disk %s %s: not found", provider, volumeID)
	}
	if r.AttachedTo != "" && (r.AttachedTo != instanceID || r.Device != devicePath) {
		return fmt.Errorf("sim: attach disk %s %s: %w to %s", provider, volumeID, ErrDiskAttached, r.AttachedTo)
	}
	if err := s.CreateDisk(provider, volumeID); err != nil {
		return err
	}
	file := s.DiskFile(provider, volumeID)
	loop, err := loopOf(file)
	if err != nil {
		return err
	}
	if loop == "" {
		out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sim: losetup %s: %w: %s", file, err, strings.TrimSpace(string(out)))
		}
		loop = strings.TrimSpace(string(out))
	}
	if err := link(loop, devicePath); err != nil {
		_ = detachLoop(file)
		return err
	}
	_, err = s.Update(provider, volumeID, func(r *Resource) error {
		if r.Extra == nil {
			r.Extra = map[string]string{}
		}
		r.AttachedTo, r.Device, r.State = instanceID, devicePath, StateInUse
		r.Extra[ExtraLoop], r.Extra[ExtraLink] = loop, devicePath
		return nil
	})
	return err
}

// ErrDiskAttached is returned by AttachDisk for a volume attached to another
// instance or at another path.
var ErrDiskAttached = errors.New("disk is attached")

// DetachDisk detaches volume volumeID from whatever it is attached to: the
// device link and the loop device go, and the resource becomes available.
// Detaching a detached volume is a no-op.
func (s *Sim) DetachDisk(provider, volumeID string) error {
	r, ok := s.Get(provider, volumeID)
	if !ok {
		return fmt.Errorf("sim: detach disk %s %s: not found", provider, volumeID)
	}
	if l := r.Extra[ExtraLink]; l != "" {
		if err := unlink(l); err != nil {
			return err
		}
	}
	if err := detachLoop(s.DiskFile(provider, volumeID)); err != nil {
		return err
	}
	_, err := s.Update(provider, volumeID, func(r *Resource) error {
		if r.AttachedTo != "" || r.State == StateInUse {
			r.State = StateAvailable
		}
		r.AttachedTo, r.Device = "", ""
		delete(r.Extra, ExtraLoop)
		delete(r.Extra, ExtraLink)
		return nil
	})
	return err
}

// DeleteDisk detaches volume volumeID if need be and removes its data file.
// The resource's state is the provider's to set.
func (s *Sim) DeleteDisk(provider, volumeID string) error {
	if err := s.DetachDisk(provider, volumeID); err != nil {
		return err
	}
	if err := os.Remove(s.DiskFile(provider, volumeID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sim: delete disk: %w", err)
	}
	return nil
}

// DetachAllDisks detaches every attached volume of every provider (their
// links and loop devices go; the data files stay), for a simulator that
// stops or a test that cleans up.
func (s *Sim) DetachAllDisks() error {
	var errs []error
	for _, r := range s.List("", KindVolume) {
		if r.AttachedTo != "" || r.Extra[ExtraLoop] != "" {
			errs = append(errs, s.DetachDisk(r.Provider, r.ID))
		}
	}
	return errors.Join(errs...)
}

// checkDevicePath refuses a device path outside /dev, or one that is not
// clean, so that a provider bug cannot make the simulator replace a file
// elsewhere on the host.
func checkDevicePath(p string) error {
	if !strings.HasPrefix(p, "/dev/") || filepath.Clean(p) != p {
		return fmt.Errorf("sim: device path %q is not a clean path under /dev", p)
	}
	return nil
}

// loopOf returns the loop device backing file, or "" when there is none.
func loopOf(file string) (string, error) {
	out, err := exec.Command("losetup", "--associated", file, "--noheadings", "--output", "NAME").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sim: losetup --associated %s: %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	dev, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(dev), nil
}

// detachLoop detaches every loop device backing file.
func detachLoop(file string) error {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for {
		dev, err := loopOf(file)
		if err != nil || dev == "" {
			return err
		}
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			// The device may have gone meanwhile (detached by a
			// concurrent detach of the same file): that is the goal.
			if now, lerr := loopOf(file); lerr == nil && now != dev {
				continue
			}
			return fmt.Errorf("sim: losetup --detach %s: %w: %s", dev, err, strings.TrimSpace(string(out)))
		}
	}
}

// link makes path a symlink to target, replacing a symlink already there.
// Anything else at path (a real device or file) is an error.
func link(target, path string) error {
	if err := checkDevicePath(path); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sim: device link: %w", err)
	}
	if cur, err := os.Readlink(path); err == nil {
		if cur == target {
			return nil
		}
		if inUse(cur) {
			return fmt.Errorf("sim: device link %s: %w (%s)", path, ErrDiskAttached, cur)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("sim: device link: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sim: device link %s: not a symlink: %w", path, err)
	}
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("sim: device link: %w", err)
	}
	return nil
}

// inUse reports whether loop device dev is set up (a link to it is not
// stale).
func inUse(dev string) bool {
	return strings.HasPrefix(dev, "/dev/loop") && exec.Command("losetup", dev).Run() == nil
}

// unlink removes the symlink at path; anything other than a symlink stays.
func unlink(path string) error {
	if err := checkDevicePath(path); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sim: device unlink: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("sim: device unlink: %s is not a symlink", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("sim: device unlink: %w", err)
	}
	return nil
}
