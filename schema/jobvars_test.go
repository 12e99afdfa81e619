package schema_test

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"hoist/schema"
)

// TestJobVolumeName: `${{ dstack.job_num }}` and its alias
// `${{ dstack.node_rank }}` resolve to the job's number wherever they
// appear in a volume name, with or without spaces inside the braces;
// other text stays.
func TestJobVolumeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		num  int
		want string
	}{
		{"data-${{ dstack.node_rank }}", 3, "data-3"},
		{"data-${{dstack.job_num}}-ckpt", 0, "data-0-ckpt"},
		{"r${{ dstack.job_num }}n${{ dstack.node_rank }}", 12, "r12n12"},
		{"plain", 5, "plain"},
	} {
		if got := schema.JobVolumeName(tc.name, tc.num); got != tc.want {
			t.Errorf("JobVolumeName(%q, %d) = %q, want %q", tc.name, tc.num, got, tc.want)
		}
	}
}

// TestVolumeNameInterpolationIsKeptForTheJobs: a run's volume names with
// the per-job references load as written, in both mount forms; each job
// resolves them (JobVolumeName).
func TestVolumeNameInterpolationIsKeptForTheJobs(t *testing.T) {
	d, err := schema.Load(fstest.MapFS{"task.dstack.yml": {Data: []byte(`type: task
name: train
commands: [x]
nodes: 2
volumes:
  - data-${{ dstack.node_rank }}:/data
  - name: ["ckpt-${{ dstack.job_num }}", shared]
    path: /ckpt
`)}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	r, ok := d.Lookup(schema.KindTask, "train")
	if !ok {
		t.Fatal("no task train")
	}
	var names [][]string
	for _, m := range r.RunConfig().Volumes {
		names = append(names, m.Name)
	}
	want := [][]string{{"data-${{ dstack.node_rank }}"}, {"ckpt-${{ dstack.job_num }}", "shared"}}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("volume names (-want +got):\n%s", diff)
	}
}
