package shim_test

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
)

// TestShim_artifactsOfANonRootJob: the runner of a container whose user is
// not root archives what that user may read and reports the rest missing.
func TestShim_artifactsOfANonRootJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "artifacts-nobody", User: "65534:65534"})
	st := runJob(t, rc, api.JobSpec{RunName: "art", JobID: "j1", WorkingDir: "/tmp/w", Commands: []string{
		"mkdir -p out/sub/empty out/locked",
		"echo a > out/a.txt && echo s > out/sub/s.txt && echo secret > out/secret.txt",
		"chmod 000 out/secret.txt out/locked",
		"ln -s /etc/passwd out/passwd",
	}})
	if st.State != api.JobDone {
		t.Fatalf("job state = %+v, want done", st)
	}
	body, missing, err := rc.Artifacts(t.Context(), []string{"out", "/tmp/w/out/a.txt", "nope"})
	if err != nil {
		t.Fatalf("Artifacts: %v", err)
	}
	defer body.Close()
	var names []string
	tr := tar.NewReader(body)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		names = append(names, h.Name)
	}
	want := []string{"out/", "out/a.txt", "out/sub/", "out/sub/empty/", "out/sub/s.txt", "tmp/w/out/a.txt"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"out/locked", "out/secret.txt", "nope"}, missing); d != "" {
		t.Errorf("missing (-want +got):\n%s", d)
	}
}
