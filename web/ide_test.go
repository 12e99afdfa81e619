package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIDEURL_isDstacksForm: each IDE's deep link, in dstack's form; none
// for an unknown IDE or a working dir that is not absolute.
func TestIDEURL_isDstacksForm(t *testing.T) {
	for _, tc := range []struct{ ide, wd, want string }{
		{"vscode", "/workflow", "vscode://vscode-remote/ssh-remote+dev/workflow"},
		{"cursor", "/", "cursor://vscode-remote/ssh-remote+dev/"},
		{"windsurf", "/a/b", "windsurf://vscode-remote/ssh-remote+dev/a/b"},
		{"zed", "/src", "zed://ssh/dev/src"},
		{"emacs", "/src", ""},
		{"vscode", "src", ""},
		{"vscode", "", ""},
	} {
		if got := IDEURL(tc.ide, "dev", tc.wd); got != tc.want {
			t.Errorf("IDEURL(%q, dev, %q) = %q, want %q", tc.ide, tc.wd, got, tc.want)
		}
	}
}

// TestRunPage_devEnvironmentShowsItsIDELinkAndSSHHint: a running dev
// environment's page links its IDE and says how to reach it over SSH
// (attach first); the API carries the link as ide_url; a finished one
// shows neither.
func TestRunPage_devEnvironmentShowsItsIDELinkAndSSHHint(t *testing.T) {
	f := newFixture(t)
	const link = "vscode://vscode-remote/ssh-remote+dev/workflow"
	f.store.putRun(Run{Name: "dev", Type: "dev-environment", Status: "running", Revision: "abc", SubmittedAt: t0, IDEURL: link})
	f.store.putRun(Run{Name: "old", Type: "dev-environment", Status: "terminated", Revision: "abc", SubmittedAt: t0,
		IDEURL: "vscode://vscode-remote/ssh-remote+old/workflow"})
	page := readBody(t, f.do(t, "GET", "/runs/dev", userTok, nil))
	for _, want := range []string{`data-testid="ide-url" href="` + link + `"`, `<code>ssh dev</code>`, `<code>hoist attach dev</code> first`} {
		if !strings.Contains(page, want) {
			t.Errorf("the dev environment's page lacks %s", want)
		}
	}
	var got struct {
		IDEURL string `json:"ide_url"`
	}
	if err := json.Unmarshal([]byte(readBody(t, f.do(t, "GET", "/api/v1/runs/dev", userTok, nil))), &got); err != nil || got.IDEURL != link {
		t.Errorf("API ide_url = %q (%v), want %q", got.IDEURL, err, link)
	}
	if page := readBody(t, f.do(t, "GET", "/runs/old", userTok, nil)); strings.Contains(page, "ide-url") || strings.Contains(page, "ssh-hint") {
		t.Errorf("a finished dev environment's page offers to connect")
	}
}
