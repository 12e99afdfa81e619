package schema_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/schema"
)

// TestLoad_withoutDotDstackLoadsAsBefore checks that a repository without
// .dstack/ loads exactly its resources, and that providers and workflows
// files anywhere but the root's .dstack/ are not specs.
func TestLoad_withoutDotDstackLoadsAsBefore(t *testing.T) {
	fsys := fstest.MapFS{
		"train.dstack.yml":            {Data: []byte("type: task\ncommands: [python train.py]\n")},
		"sub/.dstack/workflows.yaml":  {Data: []byte("workflows: [{name: x, provider: nowhere}]\n")},
		"sub/.dstack/providers.yaml":  {Data: []byte("not: [a, providers, file]\n")},
		".dstack/workflows/extra.yml": {Data: []byte("workflows: 1\n")},
	}
	d, err := schema.Load(fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(d.Resources) != 1 || d.Resources[0].Name != "train" {
		t.Fatalf("resources = %+v, want the task train only", d.Resources)
	}
}

func TestIsSpecFile_providersAndWorkflowsAtTheRootOnly(t *testing.T) {
	for name, want := range map[string]bool{
		".dstack/providers.yaml":     true,
		".dstack/workflows.yaml":     true,
		"sub/.dstack/workflows.yaml": false,
		".dstack/workflows.yml":      false,
		"workflows.yaml":             false,
		"train.dstack.yml":           true,
	} {
		if got := schema.IsSpecFile(name); got != want {
			t.Errorf("IsSpecFile(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestLoadFiles_workflowsResolveTheRootProviders checks that validating
// the workflows file alone still reads the providers it names, and that
// nothing is returned to run.
func TestLoadFiles_workflowsResolveTheRootProviders(t *testing.T) {
	fsys := fstest.MapFS{
		".dstack/providers.yaml": {Data: []byte("providers:\n  - name: curl\n    image: python:3.9\n    commands: [x]\n    schema: {type: object, required: [url]}\n")},
		".dstack/workflows.yaml": {Data: []byte("workflows:\n  - name: get\n    provider: curl\n")},
	}
	d, err := schema.LoadFiles(fsys, []string{schema.WorkflowsFile})
	var errs schema.Errors
	if d != nil || !errors.As(err, &errs) {
		t.Fatalf("LoadFiles = %v, %v; want spec errors and no desired state", d, err)
	}
	want := `.dstack/workflows.yaml:2:5: workflows[0]: field "url" is required by provider curl's schema`
	if err.Error() != want {
		t.Errorf("errors:\n%s\nwant:\n%s", err, want)
	}
	if strings.Contains(err.Error(), "providers.yaml") {
		t.Errorf("the providers file was valid, yet reported: %v", err)
	}
}

// TestParseProviderOutput_namesTheOutputsLineAndTheJobsField checks a
// program provider's output: YAML or JSON, jobs normalized as tasks', and
// errors at the output's own line and column.
func TestParseProviderOutput_namesTheOutputsLineAndTheJobsField(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
		jobs            int
	}{
		{name: "json list", out: `[{"name": "get", "image": "busybox", "commands": ["echo hi"], "artifacts": ["data"]}]`, jobs: 1},
		{name: "yaml list with a dependency", out: "- name: a\n  commands: [x]\n- name: b\n  commands: [y]\n  depends_on: [a]\n  resources: {gpu: 1}\n", jobs: 2},
		{name: "not a list", out: "name: a\n", want: "provider output:1:1: expected a list of jobs, got mapping"},
		{name: "bad field", out: "- name: a\n  commands: [x]\n  gpu: 1\n", want: `provider output:3:3: jobs[0].gpu: field "gpu" not allowed`},
		{name: "bad resources", out: "- commands: [x]\n  resources: {memory: lots}\n", want: "provider output:2:23: jobs[0].resources.memory: invalid memory"},
		{name: "unknown dependency", out: "- name: a\n  commands: [x]\n  depends_on: [b]\n", want: `provider output:3:16: jobs[0].depends_on[0]: unknown job "b"`},
		{name: "empty", out: "[]", want: "provider output:1:1: jobs: the provider generated no jobs"},
		{name: "broken yaml", out: "- [", want: "provider output:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := schema.ParseProviderOutput([]byte(tc.out))
			if tc.want == "" {
				if err != nil || len(jobs) != tc.jobs {
					t.Fatalf("ParseProviderOutput = %d jobs, %v; want %d jobs", len(jobs), err, tc.jobs)
				}
				if jobs[0].Resources.Memory.Min == nil {
					t.Errorf("job resources not normalized: %+v", jobs[0].Resources)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

// TestResolveWorkflow_readsAnotherRepositorysProvider checks a workflow
// of another repository's provider: loaded pending, then completed from
// that repository's files, with its parameters checked at the workflow.
func TestResolveWorkflow_readsAnotherRepositorysProvider(t *testing.T) {
	spec := fstest.MapFS{
		".dstack/workflows.yaml": {Data: []byte("workflows:\n  - name: gen\n    provider: {repo: 'https://git.example/p.git', name: fan}\n    n: 2\n  - name: bad\n    provider: {repo: 'https://git.example/p.git', name: fan}\n    n: zero\n")},
	}
	remote := fstest.MapFS{
		".dstack/providers.yaml": {Data: []byte("providers:\n  - name: fan\n    schema: {type: object, properties: {n: {type: integer}}}\n    cue: |\n      parameters: {n: int}\n      jobs: [for i, _ in [0, 0] {name: \"j\\(i)\", commands: [\"echo \\(parameters.n)\"]}]\n")},
	}
	d, err := schema.Load(spec)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, r := range d.Resources {
		if !r.NeedsProvider() {
			t.Fatalf("%s: loaded without its provider", r.Name)
		}
		errs := schema.ResolveWorkflow(&r, spec, remote, "0123456789abcdef")
		switch r.Name {
		case "gen":
			wf := r.Spec.(*schema.Workflow)
			if len(errs) > 0 || r.NeedsProvider() || len(wf.Jobs) != 2 || wf.Provider.Commit != "0123456789abcdef" || wf.Jobs[1].Commands[0] != "echo 2" {
				t.Fatalf("gen: errs %v, spec %+v", errs, wf)
			}
		case "bad":
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), ".dstack/workflows.yaml:7:8: workflows[1].n") {
				t.Fatalf("bad: errs %v, want one at workflows[1].n", errs)
			}
		}
	}
	missing := fstest.MapFS{}
	r := d.Resources[0]
	if errs := schema.ResolveWorkflow(&r, spec, missing, "abc"); len(errs) != 1 || !strings.Contains(errs[0].Msg, "has no .dstack/providers.yaml") {
		t.Fatalf("a repository without providers: %v", errs)
	}
}
