package shim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"hoist/agents/api"
	"hoist/e2e/testenv"
)

const (
	registryUser     = "hoist"
	registryPassword = "correct-horse"
)

// startRegistry runs Debian's docker-registry with htpasswd auth for the
// test's user (testenv.StartRegistry).
func startRegistry(t *testing.T) string {
	t.Helper()
	return testenv.StartRegistry(t, registryUser, registryPassword)
}

// pushUniqueImage commits a container of the busybox image with a 2 MB
// random file (a layer no other image has), pushes it to the registry and
// removes it locally, so that a pull has to download that layer.
func pushUniqueImage(t *testing.T, e *env, reg string) string {
	t.Helper()
	ctx := t.Context()
	ref := fmt.Sprintf("%s/hoist-test/busybox:%d", reg, time.Now().UnixNano())
	c, err := e.docker.ContainerCreate(ctx, &container.Config{
		Image:  e.image,
		Cmd:    []string{"sh", "-c", "head -c 2000000 /dev/urandom > /random.bin"},
		Labels: map[string]string{"hoist.test": "shim"},
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := e.docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := e.docker.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatal(err)
	}
	if _, err := e.docker.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	removeImage := func() {
		_, _ = e.docker.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	}
	t.Cleanup(removeImage)
	auth, _ := registry.EncodeAuthConfig(registry.AuthConfig{Username: registryUser, Password: registryPassword, ServerAddress: reg})
	rc, err := e.docker.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
		if m.Error != "" {
			t.Fatalf("push %s: %s", ref, m.Error)
		}
	}
	removeImage()
	return ref
}

func TestShim_pullFromRegistryWithAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := startRegistry(t)
	ref := pushUniqueImage(t, e, reg)
	ctx := t.Context()

	t.Run("wrong credentials terminate the task saying so", func(t *testing.T) {
		info := createAndWait(t, e, api.TaskSpec{ID: "wrong-creds", Image: ref, RegistryAuth: &api.RegistryAuth{Username: registryUser, Password: "wrong", ServerAddress: reg}})
		if info.TerminationReason != api.ReasonImagePullError || !strings.Contains(strings.ToLower(info.TerminationMessage), "unauthorized") {
			t.Errorf("task = %s: %s, want %s saying unauthorized", info.TerminationReason, info.TerminationMessage, api.ReasonImagePullError)
		}
	})
	t.Run("missing credentials terminate the task saying so", func(t *testing.T) {
		info := createAndWait(t, e, api.TaskSpec{ID: "no-creds", Image: ref})
		if info.TerminationReason != api.ReasonImagePullError || !strings.Contains(strings.ToLower(info.TerminationMessage), "no basic auth credentials") {
			t.Errorf("task = %s: %s, want %s saying no credentials", info.TerminationReason, info.TerminationMessage, api.ReasonImagePullError)
		}
	})
	t.Run("a missing image terminates the task saying so", func(t *testing.T) {
		missing := reg + "/hoist-test/does-not-exist:1"
		info := createAndWait(t, e, api.TaskSpec{ID: "missing", Image: missing, RegistryAuth: &api.RegistryAuth{Username: registryUser, Password: registryPassword, ServerAddress: reg}})
		if info.TerminationReason != api.ReasonImagePullError || !strings.Contains(strings.ToLower(info.TerminationMessage), "not found") && !strings.Contains(strings.ToLower(info.TerminationMessage), "manifest unknown") {
			t.Errorf("task = %s: %s, want %s saying not found", info.TerminationReason, info.TerminationMessage, api.ReasonImagePullError)
		}
	})
	t.Run("right credentials pull with progress and run", func(t *testing.T) {
		if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "right-creds", Image: ref, RegistryAuth: &api.RegistryAuth{Username: registryUser, Password: registryPassword, ServerAddress: reg}}); err != nil {
			t.Fatal(err)
		}
		info, err := e.client.WaitTask(ctx, "right-creds", api.TaskRunning)
		if err != nil || info.Status != api.TaskRunning {
			t.Fatalf("WaitTask = %+v, %v; want running", info, err)
		}
		p := info.Pull
		if p.TotalBytes < 2_000_000 || p.DownloadedBytes != p.TotalBytes || p.ExtractedBytes != p.TotalBytes || !p.TotalFinal {
			t.Errorf("pull progress = %+v, want the 2 MB layer downloaded and extracted", p)
		}
		rc := api.NewRunnerClient(info.RunnerAddr, nil).WithToken(info.RunnerToken)
		if st := runJob(t, rc, api.JobSpec{Commands: []string{"test -s /random.bin && echo pulled image"}}); st.State != api.JobDone {
			t.Errorf("job = %+v, want done", st)
		}
	})
}

// createAndWait creates a task and waits until it has terminated.
func createAndWait(t *testing.T, e *env, spec api.TaskSpec) api.TaskInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := e.client.CreateTask(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, err := e.client.WaitTask(ctx, spec.ID, api.TaskTerminated)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("task %s: %s: %s", spec.ID, info.TerminationReason, info.TerminationMessage)
	return info
}
