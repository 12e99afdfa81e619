package storeview_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"hoist/store"
	"hoist/web/storeview"
)

// TestGetRun_ideURLIsDstacksDeepLinkToTheJobsWorkingDir: a dev
// environment's run carries its IDE's deep link in dstack's form, for the
// SSH host named after the run, to the working directory its runner
// reported for the latest submission, else to the spec's absolute
// working_dir; without `ide`, a known working dir, or for other runs,
// there is none.
func TestGetRun_ideURLIsDstacksDeepLinkToTheJobsWorkingDir(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v := storeview.New(st, "")
	runtime := func(wd string) json.RawMessage {
		b, _ := json.Marshal(store.JobRuntime{WorkingDir: wd})
		return b
	}
	for _, tc := range []struct {
		name, typ, spec string
		jobs            []json.RawMessage // runtime data by submission
		want            string
	}{
		{name: "vscode", typ: "dev-environment", spec: `{"type":"dev-environment","ide":"vscode"}`,
			jobs: []json.RawMessage{runtime("/workflow")}, want: "vscode://vscode-remote/ssh-remote+vscode/workflow"},
		{name: "cursor-spec-dir", typ: "dev-environment", spec: `{"type":"dev-environment","ide":"cursor","working_dir":"/src"}`,
			jobs: []json.RawMessage{nil}, want: "cursor://vscode-remote/ssh-remote+cursor-spec-dir/src"},
		{name: "windsurf-retried", typ: "dev-environment", spec: `{"type":"dev-environment","ide":"windsurf"}`,
			jobs: []json.RawMessage{runtime("/old"), runtime("/new")}, want: "windsurf://vscode-remote/ssh-remote+windsurf-retried/new"},
		{name: "zed", typ: "dev-environment", spec: `{"type":"dev-environment","ide":"zed"}`,
			jobs: []json.RawMessage{runtime("/")}, want: "zed://ssh/zed/"},
		{name: "no-ide", typ: "dev-environment", spec: `{"type":"dev-environment"}`, jobs: []json.RawMessage{runtime("/")}},
		{name: "relative-spec-dir-not-started", typ: "dev-environment", spec: `{"type":"dev-environment","ide":"vscode","working_dir":"src"}`,
			jobs: []json.RawMessage{nil}},
		{name: "task", typ: "task", spec: `{"type":"task","ide":"vscode","commands":["x"]}`, jobs: []json.RawMessage{runtime("/")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &store.Run{Name: tc.name, Type: tc.typ, Revision: "abc", Status: store.RunRunning, SubmittedAt: now, Spec: json.RawMessage(tc.spec)}
			if err := st.CreateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			for i, rt := range tc.jobs {
				j := &store.Job{RunID: r.ID, RunName: r.Name, JobName: r.Name + "-0-0", SubmissionNum: i, Status: store.JobRunning,
					SubmittedAt: now.Add(time.Duration(i) * time.Minute), RuntimeData: rt}
				if err := st.CreateJob(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			got, err := v.GetRun(ctx, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if got.IDEURL != tc.want {
				t.Errorf("IDEURL = %q, want %q", got.IDEURL, tc.want)
			}
		})
	}
}
