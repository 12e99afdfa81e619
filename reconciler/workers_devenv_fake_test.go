package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// devEnv is a dev environment pinning its VS Code server and stopping
// after inactivity; its init sleeps, since the fake runner's script does
// not loop.
func devEnv(inactivity string) string {
	return "type: dev-environment\nname: dev\nimage: busybox\nide: vscode\nversion: abc123\n" +
		"init: [echo ready, sleep 1h]\ninactivity_duration: " + inactivity + "\n"
}

// TestWorkers_devEnvironmentGetsItsIDEServerAndStopsWhenNobodyIsAttached:
// a dev environment with `ide` and `version` is submitted with the IDE
// server to install (the configured mirror's URL for the instance's
// architecture, dstack's install dir) and its init followed by a wait; its
// working dir is kept for the IDE link. While an SSH connection is open it
// runs past its inactivity_duration; once nobody is attached for longer
// (on the fixture's clock), and after inactivity_duration was lowered in
// place, the job is terminated with dstack's reason and message, and its
// run ends with job_failed, as dstack's does.
func TestWorkers_devEnvironmentGetsItsIDEServerAndStopsWhenNobodyIsAttached(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "dev.dstack.yml": devEnv("2h")})
	be := f.withFakeBackend(fake.Config{}, func(c *Config) {
		c.MetricsInterval = 5 * time.Millisecond
		c.IDEDownloadURLs = map[string]string{"vscode": "http://mirror.example/vscode/{version}/server-linux-{arch}.tar.gz"}
	})
	inst := f.startTask("dev")
	j := f.job("dev")
	js, ok := be.JobSpec(inst.ID, j.ID)
	if !ok {
		t.Fatal("the runner got no job spec")
	}
	wantIDE := api.IDESpec{Name: "vscode", Version: "abc123", DownloadURL: "http://mirror.example/vscode/abc123/server-linux-x64.tar.gz",
		InstallDir: ".vscode-server/bin/abc123"}
	if js.IDE == nil || *js.IDE != wantIDE {
		t.Errorf("job spec IDE = %+v, want %+v", js.IDE, wantIDE)
	}
	if len(js.Commands) != 3 || !slices.Equal(js.Commands[:2], []string{"echo ready", "sleep 1h"}) {
		t.Errorf("commands = %q, want init and then a wait", js.Commands)
	}
	if wd := j.Runtime().WorkingDir; wd != "/" {
		t.Errorf("stored working dir = %q, want the runner's /", wd)
	}

	// tick returns once a whole tick of the pump's sampling saw the clock
	// at its present: a sample at the present is stored, and then one a
	// second later, taken after that tick's inactivity check.
	tick := func() {
		t.Helper()
		for range 2 {
			now := f.clock.Now()
			waitFor(t, "a sample at "+now.String(), func() bool {
				ps := f.samples(j.ID)
				return len(ps) > 0 && !ps[len(ps)-1].Time.Before(now)
			})
			f.clock.Advance(time.Second)
		}
	}
	advance := func(d time.Duration) {
		t.Helper()
		for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
			f.clock.Advance(10 * time.Minute)
			tick()
		}
	}

	// Attached for three hours, past the two-hour limit: it runs.
	be.SetSSHConnections(inst.ID, j.ID, 1)
	advance(3 * time.Hour)
	if j := f.job("dev"); j.Status != store.JobRunning {
		t.Fatalf("attached dev environment is %s (%s %q)", j.Status, j.TerminationReason, j.TerminationMessage)
	}
	// Detached for twenty minutes, under the limit: it runs.
	be.SetSSHConnections(inst.ID, j.ID, 0)
	idleFrom := f.clock.Now()
	advance(20 * time.Minute)
	if j := f.job("dev"); j.Status != store.JobRunning {
		t.Fatalf("dev environment idle under its limit is %s (%s %q)", j.Status, j.TerminationReason, j.TerminationMessage)
	}

	// inactivity_duration lowered to ten minutes, in place: it stops.
	runID := f.run("dev").ID
	f.write("dev.dstack.yml", devEnv("10m"))
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if r := f.run("dev"); r.ID != runID {
		t.Fatalf("the run was replaced; inactivity_duration is updatable in place")
	}
	waitFor(t, "the idle dev environment to be terminated", func() bool { return f.job("dev").Status != store.JobRunning })
	j = f.job("dev")
	idle := int64(f.clock.Now().Sub(idleFrom) / time.Second)
	if want := fmt.Sprintf("The job was inactive for %d seconds, exceeding the inactivity_duration of 600 seconds", idle); j.TerminationReason != reasonInactivity ||
		j.TerminationMessage != want {
		t.Fatalf("job %s %q %q, want %s %q", j.Status, j.TerminationReason, j.TerminationMessage, reasonInactivity, want)
	}
	j = f.stepJob("dev", store.JobTerminated)
	f.reconcileRun("dev")
	if r := f.run("dev"); r.TerminationReason != runReasonJobFailed || r.Status != store.RunTerminating && r.Status != store.RunFailed {
		t.Errorf("run %s (%s), want ended with %s", r.Status, r.TerminationReason, runReasonJobFailed)
	}
	if msg := jobStatusMessage(j); msg != "stopped" || !strings.Contains(j.TerminationMessage, "inactive") {
		t.Errorf("job status message %q (%q)", msg, j.TerminationMessage)
	}
}

// samples returns the stored metrics samples of job id.
func (f *fixture) samples(id string) []store.MetricsPoint {
	f.t.Helper()
	ps, err := f.st.MetricsPoints(f.ctx, id, time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ps
}

// TestIDESpec_followsDstacksURLsAndDirs: with `version`, the IDE server's
// download URL and install dir are dstack's for each IDE, windsurf's
// version@commit split between them, for the instance's architecture; a
// configured URL template replaces dstack's; without `version` nothing is
// installed; an architecture with no server build is refused.
func TestIDESpec_followsDstacksURLsAndDirs(t *testing.T) {
	c := &Controller{}
	mirror := &Controller{cfg: Config{IDEDownloadURLs: map[string]string{"cursor": "http://127.0.0.1:8080/{version}-{arch}.tgz"}}}
	for _, tc := range []struct {
		name    string
		c       *Controller
		ide     string
		version string
		arch    string
		want    *api.IDESpec
		wantErr string
	}{
		{name: "vscode", c: c, ide: "vscode", version: "f1a4fb1", arch: "amd64", want: &api.IDESpec{Name: "vscode", Version: "f1a4fb1",
			DownloadURL: "https://update.code.visualstudio.com/commit:f1a4fb1/server-linux-x64/stable", InstallDir: ".vscode-server/bin/f1a4fb1"}},
		{name: "cursor on arm64", c: c, ide: "cursor", version: "1.7.2", arch: "arm64", want: &api.IDESpec{Name: "cursor", Version: "1.7.2",
			DownloadURL: "https://cursor.blob.core.windows.net/remote-releases/1.7.2/vscode-reh-linux-arm64.tar.gz",
			InstallDir:  ".cursor-server/cli/servers/Stable-1.7.2/server"}},
		{name: "windsurf version@commit", c: c, ide: "windsurf", version: "1.106.0@8951cd3a", arch: "amd64", want: &api.IDESpec{Name: "windsurf",
			Version:     "1.106.0@8951cd3a",
			DownloadURL: "https://windsurf-stable.codeiumdata.com/linux-reh-x64/stable/8951cd3a/windsurf-reh-linux-x64-1.106.0.tar.gz",
			InstallDir:  ".windsurf-server/bin/8951cd3a"}},
		{name: "configured mirror", c: mirror, ide: "cursor", version: "1.7.2", arch: "amd64", want: &api.IDESpec{Name: "cursor", Version: "1.7.2",
			DownloadURL: "http://127.0.0.1:8080/1.7.2-x64.tgz", InstallDir: ".cursor-server/cli/servers/Stable-1.7.2/server"}},
		{name: "no version installs nothing", c: c, ide: "vscode", arch: "amd64"},
		{name: "no build for the architecture", c: c, ide: "vscode", version: "f1a4fb1", arch: "riscv64", wantErr: `no vscode server for the instance's architecture "riscv64"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.ideSpec(runSpec{Type: "dev-environment", IDE: tc.ide, Version: tc.version}, tc.arch)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("ideSpec = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestInactiveFor_countsFromTheLastDisconnectNotBeforeTheStart: an open
// connection is activity; otherwise idleness counts from the runner's
// IdleSince, or from the job's start when the runner's clock puts that
// earlier, and never below zero.
func TestInactiveFor_countsFromTheLastDisconnectNotBeforeTheStart(t *testing.T) {
	start := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	for _, tc := range []struct {
		name string
		a    api.SSHActivity
		want time.Duration
	}{
		{"attached", api.SSHActivity{Connections: 2}, 0},
		{"detached ten minutes ago", api.SSHActivity{IdleSince: now.Add(-10 * time.Minute)}, 10 * time.Minute},
		{"never attached", api.SSHActivity{IdleSince: start}, time.Hour},
		{"runner clock behind", api.SSHActivity{IdleSince: start.Add(-5 * time.Hour)}, time.Hour},
		{"runner clock ahead", api.SSHActivity{IdleSince: now.Add(time.Minute)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inactiveFor(tc.a, start, now); got != tc.want {
				t.Errorf("inactiveFor = %s, want %s", got, tc.want)
			}
		})
	}
}
