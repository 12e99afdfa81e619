package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"hoist/reconciler/support"
)

// refusedTask asks for what hoist does not do (a capacity reservation).
const refusedTask = "type: task\nname: train\nimage: busybox\ncommands: [echo]\nreservation: r-1\n"

func TestValidateCmd_refusesWhatHoistDoesNotSupport(t *testing.T) {
	dir := writeSpecs(t, map[string]string{
		"train.dstack.yml": refusedTask,
		"web.dstack.yml":   "type: service\nname: web\nimage: busybox\ncommands: [httpd]\nport: 80\npriority: 5\n",
	})
	_, errOut, code := runValidateCmd(t, "validate", dir)
	if code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, errOut)
	}
	want := filepath.Join(dir, "train.dstack.yml") + ":5:14: reservation: " + support.RefusedPrefix + "`reservation`"
	if !strings.HasPrefix(errOut, want) {
		t.Errorf("stderr:\n%s\nwant it to start with:\n%s", errOut, want)
	}
	if w := filepath.Join(dir, "web.dstack.yml") + ":6:11: warning: priority: "; !strings.Contains(errOut, w) {
		t.Errorf("stderr:\n%s\nwant a warning %s…", errOut, w)
	}
}

func TestValidateCmd_warningsAloneExitZero(t *testing.T) {
	dir := writeSpecs(t, map[string]string{
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\ncommands: [httpd]\nport: 80\npriority: 5\n",
	})
	out, errOut, code := runValidateCmd(t, "validate", "-o", "json", dir)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
	}
	var got struct {
		Valid    bool        `json:"valid"`
		Warnings []jsonError `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Valid || len(got.Warnings) != 1 || got.Warnings[0].Path != "priority" || got.Warnings[0].Line != 6 {
		t.Errorf("json = %s", out)
	}
}

// TestPlanCmd_refusesLocallyBeforeAskingTheServer: the refusal comes from
// the local check, so no server is needed (the address is unused).
func TestPlanCmd_refusesLocallyBeforeAskingTheServer(t *testing.T) {
	dir := writeSpecs(t, map[string]string{"train.dstack.yml": refusedTask})
	_, errOut, code := runValidateCmd(t, "plan", "--server", "http://127.0.0.1:1", "--token", "x", dir)
	want := filepath.Join(dir, "train.dstack.yml") + ":5:14: reservation: " + support.RefusedPrefix
	if code != 1 || !strings.HasPrefix(errOut, want) {
		t.Fatalf("code %d, stderr:\n%s\nwant exit 1 and %s…", code, errOut, want)
	}
}

func TestSchemaCmd_supportPrintsTheTable(t *testing.T) {
	out, _, code := runValidateCmd(t, "schema", "--support")
	if code != 0 || out != support.Markdown() {
		t.Fatalf("code %d, output starts %.200q", code, out)
	}
}
