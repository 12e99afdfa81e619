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
