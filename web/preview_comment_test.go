package web

import (
	"fmt"
	"strings"
	"testing"
)

func TestRenderPreview(t *testing.T) {
	gh := previewHead{Provider: "github", RepoURL: "https://github.com/acme/specs", SHA: "0123456789abcdef"}
	tests := []struct {
		name     string
		head     previewHead
		projects []projectPlan
		want     []string
		absent   []string
	}{
		{
			name: "changes are a table with prices before and after, unchanged ones are counted",
			head: gh,
			projects: []projectPlan{{Plan: &Plan{Valid: true, CostBefore: 1, CostAfter: 2.5, Changes: []Change{
				{Action: "update", Kind: "service", Name: "web", Detail: "changed (replicas)", CostBefore: ptrF(1), CostAfter: ptrF(2)},
				{Action: "create", Kind: "task", Name: "a|b", CostAfter: ptrF(0.5)},
				{Action: "none", Kind: "fleet", Name: "gpu"},
			}}}},
			want: []string{
				previewMarker + "\n### hoist plan for `0123456789ab`",
				"| `service/web` | update | changed (replicas) | $1.00 → $2.00 |",
				"| `task/a\\|b` | create |  | — → $0.50 |",
				"1 to create, 1 to update, 0 to replace, 0 to delete, 1 unchanged.",
				"**Estimated spend:** $1.00/h → $2.50/h",
			},
			absent: []string{"fleet/gpu", "#### Project"},
		},
		{
			name:     "errors link their position to the file at the head commit",
			head:     previewHead{Provider: "gitlab", RepoURL: "https://gitlab.example/g/p", SHA: "abc"},
			projects: []projectPlan{{Plan: &Plan{Errors: []string{"dir/a b.yml:4:2: bad", "no position here"}}}},
			want: []string{
				":x: **Invalid: 2 error(s).**",
				"- [`dir/a b.yml:4:2`](https://gitlab.example/g/p/-/blob/abc/dir/a%20b.yml#L4): bad",
				"- no position here",
			},
			absent: []string{"| Resource"},
		},
		{
			name: "one section per project, a failed one says why",
			head: gh,
			projects: []projectPlan{
				{Name: "ml", Plan: &Plan{Valid: true}},
				{Name: "web", Error: "fetch failed"},
			},
			want: []string{"#### Project `ml`\n\nNo changes (0 unchanged).", "#### Project `web`\n\n:x: **Planning failed:** fetch failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderPreview(tt.head, tt.projects)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("unexpected %q in:\n%s", a, got)
				}
			}
		})
	}
}

func TestRenderPreview_staysUnderGitHubsLimit(t *testing.T) {
	var ch []Change
	for i := range 5000 {
		ch = append(ch, Change{Action: "create", Kind: "task", Name: fmt.Sprintf("task-%04d", i), Detail: strings.Repeat("x", 40)})
	}
	got := renderPreview(previewHead{SHA: "abc"}, []projectPlan{{Plan: &Plan{Valid: true, Changes: ch}}})
	if len(got) > 65536 || !strings.Contains(got, "more change(s)") || !strings.Contains(got, "5000 to create") {
		t.Errorf("%d bytes; tail:\n%s", len(got), got[len(got)-300:])
	}
}
