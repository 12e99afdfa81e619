package shim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/e2e/testenv"
)

// loopDisk is a sparse file behind a loop device, reached through a symlink
// below /dev as a cloud's attached disk is (/dev/disk/by-id/...).
type loopDisk struct {
	file, link, loop string
}

// newLoopDisk makes a 64 MiB disk without a file system, attached.
func newLoopDisk(t *testing.T) *loopDisk {
	t.Helper()
	testenv.Require(t, "losetup")
	testenv.Require(t, "mkfs.ext4")
	testenv.Require(t, "blkid")
	testenv.Require(t, "mount")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "network volumes need root (losetup, mount)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testenv.Missing(t, "no loop device support: %v", err)
	}
	d := &loopDisk{file: filepath.Join(t.TempDir(), "disk.img")}
	if err := os.WriteFile(d.file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.file, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/dev/disk", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/dev/disk", "hoist-shimtest-")
	if err != nil {
		t.Fatal(err)
	}
	d.link = dir + "/google-data"
	t.Cleanup(func() {
		d.detach(t)
		os.RemoveAll(dir)
	})
	d.attach(t)
	return d
}

// attach sets up a loop device for the disk and points the link at it.
func (d *loopDisk) attach(t *testing.T) {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", d.file).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	d.loop = strings.TrimSpace(string(out))
	if err := os.Symlink(d.loop, d.link); err != nil {
		t.Fatal(err)
	}
}

// detach removes the link and the loop device, as a cloud's detach does.
func (d *loopDisk) detach(t *testing.T) {
	t.Helper()
	if d.loop == "" {
		return
	}
	os.Remove(d.link)
	if out, err := exec.Command("losetup", "--detach", d.loop).CombinedOutput(); err != nil {
		t.Errorf("losetup --detach %s: %v: %s", d.loop, err, out)
	}
	d.loop = ""
}

// mounted reports whether dir is a mount point in this mount namespace.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestShim_networkVolume formats a blank attached disk, mounts it into a
// task, unmounts it when the task ends; after the disk was detached and
// attached again (another loop device), a second task reads what the first
// wrote, and a registered volume (no InitFS) mounts as it is.
func TestShim_networkVolume(t *testing.T) {
	t.Parallel()
	disk := newLoopDisk(t)
	e := newEnv(t)
	ctx := t.Context()
	mnt := filepath.Join(e.state, "volumes", "data")
	vol := api.NetworkVolume{Name: "data", DevicePath: disk.link, Path: "/data", InitFS: true}

	info, rc := e.runTask(t, api.TaskSpec{ID: "vol-write", NetworkVolumes: []api.NetworkVolume{vol}})
	if !mounted(t, mnt) {
		t.Fatalf("%s not mounted while the task runs", mnt)
	}
	st := runJob(t, rc, api.JobSpec{Commands: []string{"echo written-by-task-1 > /data/f", "stat -c %a /data", "cat /proc/mounts | grep -c ' /data ext4 '"}})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "777\n1\n" {
		t.Errorf("stdout = %q, want the volume root's mode 777 and one ext4 mount at /data", got)
	}
	if _, err := e.client.TerminateTask(ctx, info.ID, api.ReasonDoneByRunner, "", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUnmounted(t, mnt)
	if err := e.client.RemoveTask(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	// RemoveTask returns once no mount, in any namespace, holds the device:
	// only then is the file system flushed and a detach safe.
	f, err := os.OpenFile(disk.loop, os.O_RDONLY|syscall.O_EXCL, 0)
	if err != nil {
		t.Fatalf("device after RemoveTask: %v; want it free", err)
	}
	f.Close()
	if out, err := exec.Command("blkid", "--probe", "--output", "value", "--match-tag", "TYPE", disk.loop).Output(); err != nil || strings.TrimSpace(string(out)) != "ext4" {
		t.Fatalf("file system on the disk: %q, %v; want ext4", out, err)
	}

	disk.detach(t)
	disk.attach(t)
	vol.InitFS = false // now as a registered volume: it already has a file system
	info, rc = e.runTask(t, api.TaskSpec{ID: "vol-read", NetworkVolumes: []api.NetworkVolume{vol}})
	st = runJob(t, rc, api.JobSpec{Commands: []string{"cat /data/f"}})
	if got := output(t, rc, api.StreamStdout); st.State != api.JobDone || got != "written-by-task-1\n" {
		t.Fatalf("second task: %+v, stdout %q", st, got)
	}
	if _, err := e.client.TerminateTask(ctx, info.ID, api.ReasonDoneByRunner, "", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUnmounted(t, mnt)
	if err := e.client.RemoveTask(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
}

func waitUnmounted(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); mounted(t, dir); {
		if time.Now().After(deadline) {
			t.Fatalf("%s still mounted after the task ended", dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShim_networkVolumeReadOnly mounts a read-only volume (a Kubernetes
// volume's read_only, on the API) read-only into the container: the job
// can read it, and a write fails.
func TestShim_networkVolumeReadOnly(t *testing.T) {
	t.Parallel()
	disk := newLoopDisk(t)
	e := newEnv(t)
	vol := api.NetworkVolume{Name: "ro", DevicePath: disk.link, Path: "/data", InitFS: true, ReadOnly: true}
	info, rc := e.runTask(t, api.TaskSpec{ID: "vol-ro", NetworkVolumes: []api.NetworkVolume{vol}})
	st := runJob(t, rc, api.JobSpec{Commands: []string{"ls -a /data >/dev/null && echo readable", "grep ' /data ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1", "touch /data/f && echo wrote"}})
	if st.State != api.JobFailed {
		t.Errorf("job = %+v, want failed by the write", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "readable\nro\n" {
		t.Errorf("stdout = %q, want the volume readable, mounted ro, and not written", got)
	}
	if got := output(t, rc, api.StreamStderr); !strings.Contains(got, "Read-only file system") {
		t.Errorf("stderr = %q, want the write refused as read-only", got)
	}
	if _, err := e.client.TerminateTask(t.Context(), info.ID, api.ReasonDoneByRunner, "", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUnmounted(t, filepath.Join(e.state, "volumes", "ro"))
	if err := e.client.RemoveTask(t.Context(), info.ID); err != nil {
		t.Fatal(err)
	}
}

// TestShim_networkVolumeRegisteredWithoutFS fails the task, without
// formatting, when a registered volume has no file system.
func TestShim_networkVolumeRegisteredWithoutFS(t *testing.T) {
	t.Parallel()
	disk := newLoopDisk(t)
	e := newEnv(t)
	ctx := t.Context()
	spec := api.TaskSpec{ID: "vol-blank", Image: e.image, NetworkVolumes: []api.NetworkVolume{{Name: "ext", DevicePath: disk.link, Path: "/data"}}}
	if _, err := e.client.CreateTask(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, err := e.client.WaitTask(ctx, spec.ID, api.TaskTerminated)
	if err != nil {
		t.Fatal(err)
	}
	if info.TerminationReason != api.ReasonExecutorError || !strings.Contains(info.TerminationMessage, "has no file system") {
		t.Fatalf("task = %s/%s: %s; want executor_error saying the volume has no file system", info.Status, info.TerminationReason, info.TerminationMessage)
	}
	if out, _ := exec.Command("blkid", "--probe", disk.loop).Output(); len(out) != 0 {
		t.Fatalf("the shim formatted a registered volume: %s", out)
	}
}

// TestShim_networkVolumeRefused refuses device paths outside /dev, names
// that are not one path component, relative container paths, and
// PersistentVolumeClaims (only the Kubernetes backend's pods mount them).
func TestShim_networkVolumeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, v := range []api.NetworkVolume{
		{Name: "data", DevicePath: "/etc/passwd", Path: "/data"},
		{Name: "data", DevicePath: "/dev/../etc/passwd", Path: "/data"},
		{Name: "data", DevicePath: "/tmp/disk", Path: "/data"},
		{Name: "../x", DevicePath: "/dev/loop0", Path: "/data"},
		{Name: "data", DevicePath: "/dev/loop0", Path: "data"},
		{Name: "data", Claim: "team-data", Path: "/data"},
	} {
		_, err := e.client.CreateTask(t.Context(), api.TaskSpec{ID: "refused", Image: e.image, NetworkVolumes: []api.NetworkVolume{v}})
		if err == nil {
			t.Errorf("CreateTask with %+v = nil, want refused", v)
		}
	}
}
