package shim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/agents/api"
)

func TestShim_refusesToMountDeniedHostPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	link := filepath.Join(t.TempDir(), "to-etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ name, path, want string }{
		{"the root", "/", "never mounts /"},
		{"a system directory", "/etc", "never mounts /etc"},
		{"below a system directory", "/root/.ssh", "never mounts /root/.ssh"},
		{"the Docker socket", "/var/run/docker.sock", "docker.sock"},
		{"a directory holding the Docker socket", "/run", "never mounts /run"},
		{"the shim's state", e.state + "/tasks", "never mounts"},
		{"a symlink to /etc", link, "never mounts /etc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "denied" + string(rune('a'+i))
			spec := api.TaskSpec{ID: id, Image: e.image, InstanceMounts: []api.InstanceMount{{InstancePath: tc.path, Path: "/host", ReadOnly: true}}}
			if _, err := e.client.CreateTask(ctx, spec); err != nil {
				t.Fatal(err)
			}
			info, err := e.client.WaitTask(ctx, id, api.TaskTerminated)
			if err != nil {
				t.Fatal(err)
			}
			if info.TerminationReason != api.ReasonCreatingContainerError || !strings.Contains(info.TerminationMessage, tc.want) || info.ContainerID != "" {
				t.Errorf("task = %s: %q (container %q), want %s mentioning %q and no container",
					info.TerminationReason, info.TerminationMessage, info.ContainerID, api.ReasonCreatingContainerError, tc.want)
			}
		})
	}
}
