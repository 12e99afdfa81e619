package reconciler

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// replanFiles are the files of the first commit of TestReplan: specs whose
// validity depends on one another (a service naming a gateway of another
// file, a workflow of .dstack/workflows.yaml using a provider of
// .dstack/providers.yaml whose program hashes its inputs), a task named
// after its file and one named after its directory.
var replanFiles = map[string]string{
	"a.dstack.yml":          "type: task\ncommands: [echo a]\n",
	"named.dstack.yml":      "type: task\nname: named\ncommands: [echo named]\n",
	"svc/.dstack.yml":       "type: service\nport: 8000\ncommands: [httpd]\ngateway: gw\n",
	"gw.dstack.yml":         "type: gateway\nname: gw\nbackend: aws\nregion: us-east-1\ndomain: gw.example.com\n",
	"fleet.dstack.yml":      "type: fleet\nname: pool\nnodes: 0..2\nbackends: [aws]\n",
	"tools/gen/main.py":     "print('jobs')\n",
	"tools/gen/schema.json": `{"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}` + "\n",
	".dstack/providers.yaml": "providers:\n  - name: gen\n    image: python:3.12\n    commands: [python3 tools/gen/main.py]\n    inputs: [tools/gen]\n" +
		"    schema: tools/gen/schema.json\n",
	".dstack/workflows.yaml": "workflows:\n  - name: build\n    provider: gen\n    size: 1\n",
}

// TestReplan_incrementalMatchesCold commits one change after another to a
// Git repository and plans each head twice: through one long-lived source
// and warm caches (what the daemon does after a commit: unchanged blobs
// and unchanged files' verdicts reused), and cold (a new source, every
// memo of the schema dropped). Verdict and plan must be the same; each
// valid plan is then applied, so the next commit plans replaces and
// deletes.
func TestReplan_incrementalMatchesCold(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@localhost", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	for name, content := range replanFiles {
		write(name, content)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "first")

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	openSource := func() source.Source {
		t.Helper()
		src, err := source.Open(ctx, source.Config{Repo: dir})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	warmSrc := openSource()
	c, err := New(Config{Now: func() time.Time { return now }, Owner: "test"}, Deps{Store: st, Source: warmSrc,
		Backends: map[string]backends.Backend{"aws": fake.New(fake.Config{Name: "aws"})}})
	if err != nil {
		t.Fatal(err)
	}
	// planHead plans the head of src and renders the verdict and the plan.
	planHead := func(src source.Source) (string, source.Revision, func()) {
		t.Helper()
		rev, err := src.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := src.Checkout(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		p, err := c.PlanFS(ctx, snap.FS)
		if err != nil {
			return "refused: " + err.Error(), rev, nil
		}
		out, err := json.MarshalIndent(p, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		for _, step := range p.Steps {
			if step.Desired != nil {
				s += fmt.Sprintf("\n%s/%s %s %s", step.Kind, step.Name, step.Desired.File, step.Desired.JSON)
			}
		}
		return s, rev, func() {
			if err := c.apply(ctx, rev, p); err != nil {
				t.Fatalf("apply %s: %v", rev.ID, err)
			}
		}
	}
	if _, _, apply := planHead(warmSrc); apply == nil {
		t.Fatal("the first commit is refused")
	} else {
		apply()
	}

	for _, tc := range []struct {
		name    string
		write   map[string]string
		remove  []string
		rename  [2]string
		refused bool
	}{
		{name: "a changed file", write: map[string]string{"a.dstack.yml": "type: task\ncommands: [echo a2]\n"}},
		{name: "a renamed file changes the derived name", rename: [2]string{"a.dstack.yml", "b.dstack.yml"}},
		{name: "a renamed directory changes the derived name", rename: [2]string{"svc", "web"}},
		{name: "a new file duplicating a name is refused", write: map[string]string{"dup.dstack.yml": "type: task\nname: named\ncommands: [echo dup]\n"}, refused: true},
		{name: "the duplicate renamed away from its twin stays refused", rename: [2]string{"dup.dstack.yml", "zz.dstack.yml"}, refused: true},
		{name: "removing the duplicate makes the revision valid", remove: []string{"zz.dstack.yml"}},
		{name: "removing a gateway refuses the service naming it", remove: []string{"gw.dstack.yml"}, refused: true},
		{name: "the gateway back in another file is valid", write: map[string]string{"gateways/gw.dstack.yml": replanFiles["gw.dstack.yml"]}},
		{name: "an unparsable file is refused", write: map[string]string{"b.dstack.yml": "type: task\ncommands: [echo\n"}, refused: true},
		{name: "the file's earlier content is valid again", write: map[string]string{"b.dstack.yml": "type: task\ncommands: [echo a2]\n"}},
		{name: "a changed provider input changes the workflow", write: map[string]string{"tools/gen/main.py": "print('other jobs')\n"}},
		{name: "a provider schema the workflow breaks is refused", write: map[string]string{"tools/gen/schema.json": `{"type": "object", "properties": {"size": {"type": "string"}}}` + "\n"}, refused: true},
		{name: "the workflow fixed to the schema is valid", write: map[string]string{".dstack/workflows.yaml": "workflows:\n  - name: build\n    provider: gen\n    size: one\n"}},
		{name: "a removed provider refuses the workflow", write: map[string]string{".dstack/providers.yaml": "providers: []\n"}, refused: true},
		{name: "the removed provider's workflow removed too is valid", remove: []string{".dstack/workflows.yaml"}},
		{name: "a removed fleet", remove: []string{"fleet.dstack.yml"}},
		{name: "a file back as it was first", write: map[string]string{"fleet.dstack.yml": replanFiles["fleet.dstack.yml"]}},
	} {
		for name, content := range tc.write {
			write(name, content)
		}
		for _, name := range tc.remove {
			git("rm", "-q", "-r", name)
		}
		if tc.rename[0] != "" {
			git("mv", tc.rename[0], tc.rename[1])
		}
		git("add", "-A")
		git("commit", "-q", "-m", tc.name)

		warm, rev, apply := planHead(warmSrc)
		schema.DropFieldCache()
		schema.DropCachedValidators()
		schema.DropFileCache()
		cold, _, _ := planHead(openSource())
		if warm != cold {
			t.Fatalf("%s: incremental and cold plans of %s differ\nincremental:\n%s\ncold:\n%s", tc.name, rev.ID, warm, cold)
		}
		if refused := apply == nil; refused != tc.refused {
			t.Fatalf("%s: refused %v, want %v:\n%s", tc.name, refused, tc.refused, warm)
		}
		if apply != nil {
			apply()
		}
	}
}
