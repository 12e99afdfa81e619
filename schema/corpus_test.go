package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"hoist/schema"
)

var update = flag.Bool("update", false, "rewrite the golden want.json / want.errors sections")

// archiveFS builds an fs from every section of a txtar archive except the
// want.* golden sections.
func archiveFS(a *txtar.Archive) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, f := range a.Files {
		if strings.HasPrefix(f.Name, "want.") {
			continue
		}
		fsys[f.Name] = &fstest.MapFile{Data: f.Data}
	}
	return fsys
}

// render formats a load result the way the golden sections store it.
func render(t *testing.T, d *schema.Desired, err error) (section string, out []byte) {
	t.Helper()
	if err != nil {
		var errs schema.Errors
		if !errors.As(err, &errs) {
			t.Fatalf("Load returned a non-spec error: %v", err)
		}
		return "want.errors", []byte(errs.Error() + "\n")
	}
	var b bytes.Buffer
	for _, r := range d.Resources {
		fmt.Fprintf(&b, "# %s %s (%s)\n", r.Kind, r.Name, r.File)
		if err := json.Indent(&b, r.JSON, "", "  "); err != nil {
			t.Fatalf("resource JSON is not valid: %v", err)
		}
		b.WriteByte('\n')
	}
	return "want.json", b.Bytes()
}

func runArchive(t *testing.T, path string) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := schema.Load(archiveFS(a))
	section, got := render(t, d, err)
	if *update {
		var files []txtar.File
		for _, f := range a.Files {
			if !strings.HasPrefix(f.Name, "want.") {
				files = append(files, f)
			}
		}
		a.Files = append(files, txtar.File{Name: section, Data: got})
		if err := os.WriteFile(path, txtar.Format(a), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var want []byte
	found := false
	for _, f := range a.Files {
		if f.Name == section {
			want, found = f.Data, true
		}
	}
	if !found {
		t.Fatalf("no %s section (got %s):\n%s\nrun go test ./schema -update", section, section, got)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", section, diff)
	}
}

// TestCorpus_dstackConfigs loads every configuration taken from dstack's
// docs and examples; each must validate and normalize to its golden JSON.
func TestCorpus_dstackConfigs(t *testing.T) {
	paths, _ := filepath.Glob("testdata/corpus/*.txtar")
	if len(paths) < 91 {
		t.Fatalf("corpus has %d archives, want at least 91", len(paths))
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			runArchive(t, p)
			if !*update {
				a, _ := txtar.ParseFile(p)
				for _, f := range a.Files {
					if f.Name == "want.errors" {
						t.Errorf("a dstack config must validate, got errors:\n%s", f.Data)
					}
				}
			}
		})
	}
}

// TestCorpus_errors checks the exact errors (position and message) for
// broken specs.
func TestCorpus_errors(t *testing.T) {
	paths, _ := filepath.Glob("testdata/errors/*.txtar")
	sort.Strings(paths)
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			runArchive(t, p)
		})
	}
}

// TestCorpus_valid holds hand-written valid specs (CUE files, shorthands).
func TestCorpus_valid(t *testing.T) {
	paths, _ := filepath.Glob("testdata/valid/*.txtar")
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			runArchive(t, p)
		})
	}
}
