package schema_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"hoist/schema"
)

// serverRules are messages of rules dstack enforces on its server (at
// apply), not in its parser; hoist rejects them at load time as well.
var serverRules = []string{
	"either `nodes` or `ssh_config`", "must be set when the requested accelerator", "no ssh user", "no ssh key",
	"either `size` or", "retry.duration cannot be negative", "certificate type is not supported",
	"SSH fleet configuration does not support", "backend fleet configuration does not support",
	"gateways are not supported", "private gateways", "must be set when ARM", "not supported on ARM", "internal_ip",
	"at most 3", "cannot interpolate gateway", "maximum time_window", "scheduled services",
	"probe timeout cannot be longer", "more than 10 probes", "illegal reference", "invalid reference",
	"groups IP references", "external volumes", "invalid volume mount path", "cron expression",
	"`nodes` and `ssh_config` are mutually exclusive",
}

// knownDeviations are dstack rejections hoist accepts on purpose: configs
// from dstack's own docs that the issue requires to validate.
var knownDeviations = []string{"gateway.router", "VolumeMountPoint.optional"}

// TestDifferential_dstack compares accept/reject verdicts with dstack's
// parser on mutated configurations. See testdata/differential/README.md.
func TestDifferential_dstack(t *testing.T) {
	pyPath := os.Getenv("HOIST_DSTACK_PYTHONPATH")
	if pyPath == "" {
		t.Skip("set HOIST_DSTACK_PYTHONPATH to dstack's and gpuhunt's src directories")
	}
	dir := t.TempDir()
	diffDir, _ := filepath.Abs("testdata/differential")
	corpus, _ := filepath.Abs("testdata/corpus")
	// The corpus archives hold the configs; extract them for mutate.py.
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archives, _ := filepath.Glob(filepath.Join(corpus, "*.txtar"))
	for _, a := range archives {
		data, _ := os.ReadFile(a)
		body := string(data)
		start := strings.Index(body, ".dstack.yml --\n")
		end := strings.Index(body, "\n-- want.")
		if start < 0 || end < 0 {
			continue
		}
		_ = os.WriteFile(filepath.Join(src, filepath.Base(a)+".yml"), []byte(body[start+len(".dstack.yml --\n"):end+1]), 0o644)
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
	py(filepath.Join(diffDir, "mutate.py"), mutDir, "1", "2000", filepath.Join(src, "*.yml"))
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
