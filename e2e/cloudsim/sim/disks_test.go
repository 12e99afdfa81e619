package sim_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// needLoop ends the test unless loop devices can be set up here.
func needLoop(t *testing.T) {
	t.Helper()
	testenv.Require(t, "losetup")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "loop devices need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testenv.Missing(t, "no loop device support: %v", err)
	}
}

// devDir makes a directory of its own below /dev/disk for the test's links.
func devDir(t *testing.T) string {
	t.Helper()
	if err := os.MkdirAll("/dev/disk", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/dev/disk", "hoist-simtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newDiskSim(t *testing.T) *sim.Sim {
	t.Helper()
	s, err := sim.New(sim.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.DetachAllDisks(); err != nil {
			t.Errorf("detach all: %v", err)
		}
	})
	return s
}

// TestDiskAttachDetach attaches a simulated disk at a provider device path,
// writes through the link, detaches (link and loop device gone), attaches at
// another path and reads the data back, then deletes the file.
func TestDiskAttachDetach(t *testing.T) {
	needLoop(t)
	s := newDiskSim(t)
	if _, err := s.Create(sim.Resource{Provider: "aws", Kind: sim.KindVolume, ID: "vol-0abc1", SizeGB: 1, State: sim.StateAvailable}); err != nil {
		t.Fatal(err)
	}
	vol := s.List("aws", sim.KindVolume)[0].ID
	dir := devDir(t)
	dev := dir + "/nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(vol, "-", "")

	if err := s.AttachDisk("aws", vol, "i-1", dev); err != nil {
		t.Fatal(err)
	}
	if err := s.AttachDisk("aws", vol, "i-1", dev); err != nil {
		t.Fatalf("attach again, same instance and path: %v", err)
	}
	if err := s.AttachDisk("aws", vol, "i-2", dev); !errors.Is(err, sim.ErrDiskAttached) {
		t.Fatalf("attach to another instance: %v, want ErrDiskAttached", err)
	}
	r, _ := s.Get("aws", vol)
	loop := r.Extra[sim.ExtraLoop]
	if r.State != sim.StateInUse || r.AttachedTo != "i-1" || r.Device != dev || !strings.HasPrefix(loop, "/dev/loop") {
		t.Fatalf("attached resource = %+v", r)
	}
	if got, err := filepath.EvalSymlinks(dev); err != nil || got != loop {
		t.Fatalf("link %s -> %q, %v; want %s", dev, got, err, loop)
	}
	if fi, err := os.Stat(s.DiskFile("aws", vol)); err != nil || fi.Size() != 1<<30 {
		t.Fatalf("disk file: %v, %v", fi, err)
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hoist-disk"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	if err := s.DetachDisk("aws", vol); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dev); !os.IsNotExist(err) {
		t.Fatalf("link still there after detach: %v", err)
	}
	if out, _ := exec.Command("losetup", "--associated", s.DiskFile("aws", vol)).Output(); len(out) != 0 {
		t.Fatalf("loop device still there after detach: %s", out)
	}
	r, _ = s.Get("aws", vol)
	if r.State != sim.StateAvailable || r.AttachedTo != "" || r.Extra[sim.ExtraLoop] != "" {
		t.Fatalf("detached resource = %+v", r)
	}
	if err := s.DetachDisk("aws", vol); err != nil {
		t.Fatalf("detach twice: %v", err)
	}

	dev2 := dir + "/lun7"
	if err := s.AttachDisk("aws", vol, "i-2", dev2); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	f, err = os.Open(dev2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(buf, 4096)
	f.Close()
	if err != nil || string(buf) != "hoist-disk" {
		t.Fatalf("read back %q, %v", buf, err)
	}

	if err := s.DeleteDisk("aws", vol); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dev2); !os.IsNotExist(err) {
		t.Fatalf("link still there after delete: %v", err)
	}
	if _, err := os.Stat(s.DiskFile("aws", vol)); !os.IsNotExist(err) {
		t.Fatalf("disk file still there after delete: %v", err)
	}
}

// TestDiskDevicePathOutsideDev refuses links outside /dev and unclean paths.
func TestDiskDevicePathOutsideDev(t *testing.T) {
	s, err := sim.New(sim.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(sim.Resource{Provider: "gcp", Kind: sim.KindVolume, ID: "d1"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/passwd", "/dev/../etc/x", "dev/x", "/dev/disk/../../tmp/x"} {
		if err := s.AttachDisk("gcp", "d1", "vm", p); err == nil {
			t.Errorf("AttachDisk(%q) = nil, want an error", p)
		}
	}
}

// TestDiskLinkInUse refuses to take over a device path that links to a loop
// device another volume still uses (two Azure disks on one LUN).
func TestDiskLinkInUse(t *testing.T) {
	needLoop(t)
	s := newDiskSim(t)
	for _, id := range []string{"d1", "d2"} {
		if _, err := s.Create(sim.Resource{Provider: "azure", Kind: sim.KindVolume, ID: id, SizeGB: 1}); err != nil {
			t.Fatal(err)
		}
	}
	dir := devDir(t)
	if err := s.AttachDisk("azure", "d1", "vm1", dir+"/lun3"); err != nil {
		t.Fatal(err)
	}
	if err := s.AttachDisk("azure", "d2", "vm2", dir+"/lun3"); !errors.Is(err, sim.ErrDiskAttached) {
		t.Fatalf("second disk on the same link: %v, want ErrDiskAttached", err)
	}
	r, _ := s.Get("azure", "d2")
	if r.AttachedTo != "" {
		t.Fatalf("refused disk recorded as attached: %+v", r)
	}
	if out, _ := exec.Command("losetup", "--associated", s.DiskFile("azure", "d2")).Output(); len(out) != 0 {
		t.Fatalf("refused disk left a loop device: %s", out)
	}
}
