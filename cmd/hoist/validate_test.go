package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runValidateCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		t.Fatalf("validate: %v", err)
	}
	return out.String(), errb.String(), code
}

func writeSpecs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestValidateCmd_validSetExitsZero(t *testing.T) {
	dir := writeSpecs(t, map[string]string{
		"train.dstack.yml":  "type: task\ncommands: [python train.py]\nresources:\n  gpu: A100:8\n",
		"fleet/.dstack.yml": "type: fleet\nnodes: 0..2\n",
		"notes/readme.yml":  "not: a spec\n",
		"specs/serving.cue": "package specs\n\nweb: #Service & {image: \"nginx\", port: 80}\n",
	})
	out, errOut, code := runValidateCmd(t, "validate", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "3 resources valid") {
		t.Errorf("stdout = %q", out)
	}
}

func TestValidateCmd_errorsSortedOnStderrExitOne(t *testing.T) {
	dir := writeSpecs(t, map[string]string{
		"b.dstack.yml": "type: task\nname: shared\ncomands: [x]\nimage: ubuntu\n",
		"a.dstack.yml": "type: service\nname: shared\nimage: x\nport: 80\nreplicas: 0..3\n",
	})
	_, errOut, code := runValidateCmd(t, "validate", dir)
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	a, b := filepath.Join(dir, "a.dstack.yml"), filepath.Join(dir, "b.dstack.yml")
	want := a + ":5:11: replicas: when you set `replicas` to a range, ensure to specify `scaling`\n" +
		b + ":3:1: comands: field \"comands\" not allowed (did you mean \"commands\"?)\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

func TestValidateCmd_duplicateAcrossPathsNamesBothFiles(t *testing.T) {
	d1 := writeSpecs(t, map[string]string{"x.dstack.yml": "type: task\nname: same\ncommands: [x]\n"})
	d2 := writeSpecs(t, map[string]string{"y.dstack.yml": "type: dev-environment\nname: same\nide: vscode\n"})
	_, errOut, code := runValidateCmd(t, "validate", filepath.Join(d1, "x.dstack.yml"), d2)
	if code != 1 || !strings.Contains(errOut, "duplicate run name \"same\"") ||
		!strings.Contains(errOut, "x.dstack.yml") || !strings.Contains(errOut, "y.dstack.yml") {
		t.Fatalf("code %d, stderr:\n%s", code, errOut)
	}
}

func TestValidateCmd_jsonOutput(t *testing.T) {
	dir := writeSpecs(t, map[string]string{"v.dstack.yml": "type: volume\nname: data\nbackend: aws\nsize: 100GB\n"})
	out, _, code := runValidateCmd(t, "validate", "--output", "json", dir)
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	var got struct {
		Valid  bool
		Errors []struct {
			File    string
			Line    int
			Column  int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("bad JSON %v:\n%s", err, out)
	}
	if got.Valid || len(got.Errors) != 1 || got.Errors[0].Line != 1 || got.Errors[0].Message != `field "region" is required` {
		t.Errorf("got %+v", got)
	}
}

func TestSchemaCmd_printsEmbeddedSchema(t *testing.T) {
	out, _, code := runValidateCmd(t, "schema")
	if code != 0 || !strings.Contains(out, "#Task: {") || !strings.Contains(out, "#Fleet: {") {
		t.Fatalf("code %d, output starts %.200q", code, out)
	}
}

func TestValidateCmd_configAppliesThePolicy(t *testing.T) {
	dir := writeSpecs(t, map[string]string{
		"host.dstack.yml": "type: task\nname: host\ncommands: [ls /host]\nvolumes:\n  - /:/host\n",
		"priv.dstack.yml": "type: task\nname: priv\ncommands: [id]\nprivileged: true\n",
	})
	cfgPath := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(cfgPath, []byte("backends:\n  - type: local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runValidateCmd(t, "validate", dir, "--config", cfgPath)
	if code != 1 {
		t.Fatalf("code %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		"host.dstack.yml:5:5: volumes[0]: instance path / is never mountable",
		"priv.dstack.yml:4:13: privileged: privileged containers are not allowed on backend local: allow them with policy.privileged or policy.backends.local.privileged in the server config",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// Without --config only the schema is checked.
	if _, errOut, code := runValidateCmd(t, "validate", dir); code != 0 {
		t.Fatalf("without --config: code %d, stderr:\n%s", code, errOut)
	}
}
