package e2e

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/forge"
)

// TestMeasure_previews measures a pull request's preview through a real
// hoist serve and a fake GitHub on loopback: a repository of 1,000 specs
// (elastic fleets of no nodes, so nothing is provisioned) and pull
// requests changing 10 files (5 fleets changed, 5 tasks added). For the
// opening push and HOIST_MEASURE_PUSHES (default 5) further pushes it
// prints webhook → comment posted (the latency a reviewer sees), and the
// server's own figures from its pr_preview_posted log line: planning
// (fetch, validate, plan) and planning + posting (status, comment). Set
// HOIST_MEASURE=1 to run it; HOIST_MEASURE_SPECS changes 1,000.
func TestMeasure_previews(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	specs, pushes := 1000, 5
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_SPECS")); err == nil && v > 10 {
		specs = v
	}
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_PUSHES")); err == nil && v > 0 {
		pushes = v
	}
	fleet := func(name, cpu string) string {
		return fmt.Sprintf("type: fleet\nname: %s\nnodes: 0..1\nbackends: [local]\nresources:\n  cpu: %s..\n  memory: 1GB..\n", name, cpu)
	}
	gh := forge.NewGitHub(t, "ghp_measure")
	t.Setenv("HOIST_WEBHOOK_SECRET", previewSecret)
	t.Setenv("HOIST_GITHUB_TOKEN", "ghp_measure")
	t.Setenv("HOIST_GITHUB_API", gh.URL)
	main := newRepo(t)
	for i := range specs {
		main.write(fmt.Sprintf("fleets/d%02d/f%04d.dstack.yml", i%20, i), fleet(fmt.Sprintf("f%04d", i), "1"))
	}
	head := main.commit("1,000 specs")
	s := startServer(t, main.dir, "--branch", "main", "--validate-timeout", "5m")
	start := time.Now()
	waitFor(t, 10*time.Minute, func() string { return fmt.Sprintf("sync %+v", s.sync()) }, func() bool {
		st := s.sync()
		return st.Revision == head && st.Status == "synced"
	})
	fmt.Printf("previews on a repository of %d specs (real hoist serve, fake GitHub on loopback)\n", specs)
	fmt.Printf("  first sync of main: %s\n", time.Since(start).Round(time.Millisecond))

	feature := &repo{t: t, dir: t.TempDir()}
	feature.git("clone", "-q", main.dir, ".")
	feature.git("checkout", "-q", "-b", "feature")
	var latency []time.Duration
	for p := 0; p <= pushes; p++ {
		for j := range 5 {
			i := (p*5 + j) % specs
			feature.write(fmt.Sprintf("fleets/d%02d/f%04d.dstack.yml", i%20, i), fleet(fmt.Sprintf("f%04d", i), strconv.Itoa(2+p)))
			feature.write(fmt.Sprintf("pr/t%d-%d.dstack.yml", p, j), task(fmt.Sprintf("pr-%d-%d", p, j), "  - echo hi\n"))
		}
		sha := feature.pushFeature(fmt.Sprintf("push %d: 10 files", p))
		action := "synchronize"
		if p == 0 {
			action = "opened"
		}
		sent := time.Now()
		s.signedHook("github", "pull_request", githubPR(action, 1, sha))
		waitFor(t, 5*time.Minute, func() string { return fmt.Sprintf("comment for %s", sha) }, func() bool {
			cs := gh.Comments("acme/specs", 1)
			return len(cs) == 1 && strings.Contains(cs[0].Body, sha[:12])
		})
		latency = append(latency, time.Since(sent))
		// The server logs its figures once the comment is posted.
		waitFor(t, time.Minute, func() string { return "pr_preview_posted logged" }, func() bool {
			pl, _ := logged(s.logText())
			return len(pl) == p+1
		})
	}
	cs := gh.Comments("acme/specs", 1)
	if len(cs) != 1 || cs[0].Edits != pushes {
		t.Errorf("comments %d (edits %d), want one edited %d times", len(cs), cs[0].Edits, pushes)
	}
	if !strings.Contains(cs[0].Body, "to create") || !strings.Contains(cs[0].Body, "to update") {
		t.Errorf("last comment:\n%s", cs[0].Body)
	}
	planMS, totalMS := logged(s.logText())
	fmt.Printf("  comment size %d bytes; %d statuses posted\n", len(cs[0].Body), len(gh.Statuses()))
	for i, d := range latency {
		what := "open"
		if i > 0 {
			what = fmt.Sprintf("push %d", i)
		}
		pl, tot := "?", "?"
		if i < len(planMS) {
			pl, tot = planMS[i]+" ms", totalMS[i]+" ms"
		}
		fmt.Printf("  %-8s webhook → comment %-10s  server: plan %-9s plan+post %s\n", what, d.Round(time.Millisecond), pl, tot)
	}
	sorted := append([]time.Duration(nil), latency[1:]...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	if len(sorted) > 0 {
		fmt.Printf("  pushes: median webhook → comment %s, max %s\n", sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	}
}

var previewLogRE = regexp.MustCompile(`pr_preview_posted.*?plan_ms=(\d+).*?total_ms=(\d+)`)

// logged returns plan_ms and total_ms of each pr_preview_posted line.
func logged(log string) (plan, total []string) {
	for _, m := range previewLogRE.FindAllStringSubmatch(log, -1) {
		plan, total = append(plan, m[1]), append(total, m[2])
	}
	return plan, total
}
