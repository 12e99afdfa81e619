package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/schema"
	"hoist/web"
)

func TestReplaceRunBlock_putsTheEntryFirstAndReplacesItInPlace(t *testing.T) {
	block := func(v string) string {
		return runSSHConfigBlock("dev", "/home/u/.config/hoist/ssh/id_"+v, "/home/u/.config/hoist/ssh/known_hosts",
			[]string{"/usr/local/bin/hoist", "ssh-proxy", "dev", "--server", "http://127.0.0.1:8080"})
	}
	user := "Host *\n  StrictHostKeyChecking no\n"
	first := replaceRunBlock(user, "dev", block("a"))
	if !strings.HasPrefix(first, "# >>> hoist run dev >>>\nHost dev\n") || !strings.HasSuffix(first, "\n"+user) {
		t.Fatalf("first attach:\n%s", first)
	}
	other := replaceRunBlock(first, "train", runSSHConfigBlock("train", "/k", "/kh", []string{"/hoist", "ssh-proxy", "train"}))
	second := replaceRunBlock(other, "dev", block("b"))
	if strings.Count(second, "Host dev\n") != 1 || !strings.Contains(second, "id_b") || strings.Contains(second, "id_a") {
		t.Fatalf("second attach duplicated or kept the old entry:\n%s", second)
	}
	if !strings.Contains(second, "Host train\n") || !strings.HasSuffix(second, user) {
		t.Fatalf("second attach lost other content:\n%s", second)
	}
	broken := "# >>> hoist run dev >>>\nHost dev\n  User someone\n"
	if got := replaceRunBlock(broken, "dev", block("c")); !strings.HasSuffix(got, broken) {
		t.Fatalf("an entry without its end marker was not kept:\n%s", got)
	}
	checkGolden(t, "attach-ssh-config", block("a"))
}

func TestShellQuote_leavesPlainWordsAndQuotesTheRest(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/hoist":        "/usr/bin/hoist",
		"http://127.0.0.1:8080": "http://127.0.0.1:8080",
		"/home/a b/hoist":       "'/home/a b/hoist'",
		"it's":                  `'it'\''s'`,
		"":                      "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestListenPorts_takesTheWantedPortOrTheNextFreeOne(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	free := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}()
	got, err := listenPorts([]schema.PortMapping{
		{LocalPort: &port, ContainerPort: 8000}, // in use here: the next free one
		{ContainerPort: free},                   // `*:N`: the container port when free
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range got {
			p.ln.Close()
		}
	}()
	if len(got) != 2 || got[0].LocalPort <= port || got[0].Wanted != port || got[0].ContainerPort != 8000 {
		t.Fatalf("busy port: %+v", got)
	}
	if got[1].LocalPort != free || got[1].Wanted != 0 {
		t.Fatalf("free port: %+v", got[1])
	}
	var out bytes.Buffer
	a := attachment{Run: "dev", Ports: []forwardedPort{{ContainerPort: 8000, LocalPort: 8001, Wanted: 8000}, {ContainerPort: 6006, LocalPort: 6006}},
		SSHHost: "dev", SSHConfig: "/home/u/.ssh/config", IDEURL: "vscode://vscode-remote/ssh-remote+dev/workflow"}
	if err := printAttachment(&out, "table", a); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "attach", out.String())
	out.Reset()
	if err := printAttachment(&out, "json", a); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "attach-json", out.String())
}

func TestRecordHostKey_keepsOneLinePerRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ssh", "known_hosts")
	for i, step := range []struct{ host, key string }{{"dev", "ssh-ed25519 AAAA1"}, {"train", "ssh-ed25519 AAAA2"}, {"dev", "ssh-ed25519 AAAA3"}} {
		if err := recordHostKey(path, step.host, step.key); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "train ssh-ed25519 AAAA2\ndev ssh-ed25519 AAAA3\n"; string(b) != want {
		t.Fatalf("known_hosts:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v", fi.Mode())
	}
}

func TestLoadUserKey_generatesTheDefaultKeyOnce(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	k1, err := loadUserKey("")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := loadUserKey("")
	if err != nil {
		t.Fatal(err)
	}
	if k1.authorizedKey() != k2.authorizedKey() || !strings.HasPrefix(k1.authorizedKey(), "ssh-ed25519 ") {
		t.Fatalf("keys %q and %q", k1.authorizedKey(), k2.authorizedKey())
	}
	for p, mode := range map[string]os.FileMode{k1.path: 0o600, filepath.Dir(k1.path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, mode)
		}
	}
	pub, err := os.ReadFile(k1.path + ".pub")
	if err != nil || !strings.HasPrefix(string(pub), k1.authorizedKey()) {
		t.Errorf("public key file %q, %v", pub, err)
	}
	if other, err := loadUserKey(k1.path); err != nil || other.authorizedKey() != k1.authorizedKey() {
		t.Errorf("--identity of the same file: %v", err)
	}
}

func TestRunPorts_ofTheAttachedJobsGroup(t *testing.T) {
	spec := `{"type":"task","groups":[{"name":"head","nodes":1,"ports":[{"container_port":8000}]},{"name":"workers","nodes":2,"ports":[{"container_port":9000}]}]}`
	run := web.Run{Name: "train", Spec: json.RawMessage(spec), Jobs: []web.Job{
		{ID: "j0", SubmissionNum: 0, Status: "provisioning", Group: "head"},
		{ID: "j1", SubmissionNum: 0, Status: "running", Group: "workers"},
	}}
	for _, tc := range []struct {
		name, job string
		want      int
	}{
		{name: "the first running job", job: "", want: 9000},
		{name: "the job asked for", job: "j0", want: 8000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports, err := runPorts(run, tc.job)
			if err != nil || len(ports) != 1 || ports[0].ContainerPort != tc.want {
				t.Fatalf("runPorts(%q) = %+v, %v; want container port %d", tc.job, ports, err, tc.want)
			}
		})
	}
	plain := web.Run{Name: "dev", Spec: json.RawMessage(`{"type":"task","ports":[{"container_port":7000}]}`)}
	if ports, err := runPorts(plain, ""); err != nil || len(ports) != 1 || ports[0].ContainerPort != 7000 {
		t.Fatalf("runPorts of a task without groups = %+v, %v", ports, err)
	}
}
