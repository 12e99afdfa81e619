package schema_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"hoist/schema"
)

// serverRules are messages of rules dstack enforces on its server or in
// `dstack apply` (not in its parser); hoist rejects them at load time too.
var serverRules = []string{
	"either `nodes` or `ssh_config`", "must be set when the requested accelerator", "no ssh user", "no ssh key",
	"either `size` or", "retry.duration cannot be negative", "certificate type is not supported",
	"SSH fleet configuration does not support", "backend fleet configuration does not support",
	"gateways are not supported", "private gateways", "must be set when ARM", "not supported on ARM", "internal_ip",
	"at most 3", "cannot interpolate gateway", "maximum time_window", "scheduled services",
	"probe timeout cannot be longer", "more than 10 probes", "illegal reference", "invalid reference",
	"groups IP references", "external volumes", "invalid volume mount path", "cron expression",
	"`nodes` and `ssh_config` are mutually exclusive", "working_dir must be absolute", "failed to interpolate",
	"no pattern closing",
}

// knownDeviations are dstack rejections hoist accepts on purpose: configs
// from dstack's own docs that the issue requires to validate, and the
// `hoist:` block of a volume or gateway, hoist's own extension.
var knownDeviations = []string{"gateway.router", "VolumeMountPoint.optional", ".hoist"}

// TestDifferential_dstack compares accept/reject verdicts with dstack's
// parser on mutated configurations. See testdata/differential/README.md.
func TestDifferential_dstack(t *testing.T) {
	pyPath := os.Getenv("HOIST_DSTACK_PYTHONPATH")
	if pyPath == "" {
		t.Skip("set HOIST_DSTACK_PYTHONPATH to dstack's and gpuhunt's src directories")
	}
	dir := t.TempDir()
	diffDir, _ := filepath.Abs("testdata/differential")
	// The golden archives hold the configs; extract them for mutate.py.
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archives, _ := filepath.Glob("testdata/corpus/*.txtar")
	valid, _ := filepath.Glob("testdata/valid/*.txtar")
	for i, a := range append(archives, valid...) {
		ar, err := txtar.ParseFile(a)
		if err != nil {
			t.Fatal(err)
		}
		for j, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".yml") {
				_ = os.WriteFile(filepath.Join(src, fmt.Sprintf("%d-%d.yml", i, j)), f.Data, 0o644)
			}
		}
	}
	py := func(args ...string) []byte {
		cmd := exec.Command("python3", args...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pyPath+":"+filepath.Join(diffDir, "stubs"))
		cmd.Stderr = nil
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3 %v: %v", args[0], err)
		}
		return out
	}
	mutDir := filepath.Join(dir, "mut")
	seed, count := os.Getenv("HOIST_DIFF_SEED"), os.Getenv("HOIST_DIFF_COUNT")
	if seed == "" {
		seed = "1"
	}
	if count == "" {
		count = "2000"
	}
	py(filepath.Join(diffDir, "mutate.py"), mutDir, seed, count, filepath.Join(src, "*.yml"))
	files, _ := filepath.Glob(filepath.Join(mutDir, "*", "*.yml"))
	verdicts := map[string]struct {
		OK  bool
		Err string
	}{}
	sc := bufio.NewScanner(strings.NewReader(string(py(append([]string{filepath.Join(diffDir, "oracle.py")}, files...)...))))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v struct {
			Path string
			OK   bool
			Err  string
		}
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			verdicts[v.Path] = struct {
				OK  bool
				Err string
			}{v.OK, v.Err}
		}
	}
	disagree := 0
	for _, f := range files {
		want, ok := verdicts[f]
		if !ok {
			continue
		}
		_, err := schema.LoadFiles(os.DirFS(filepath.Dir(f)), []string{filepath.Base(f)})
		var errs schema.Errors
		if err != nil && !errors.As(err, &errs) {
			t.Fatal(err)
		}
		switch {
		case want.OK && err != nil:
			if containsAny(err.Error(), serverRules) {
				continue
			}
		case !want.OK && err == nil:
			if containsAny(want.Err, knownDeviations) {
				continue
			}
		default:
			continue
		}
		disagree++
		if disagree <= 20 {
			src, _ := os.ReadFile(f)
			t.Errorf("dstack ok=%v (%s), hoist: %v\n%s", want.OK, want.Err, err, src)
		}
	}
	t.Logf("%d mutations, %d disagreements", len(files), disagree)
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
