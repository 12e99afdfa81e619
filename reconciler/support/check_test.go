package support

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/schema"
)

func load(t *testing.T, src string) *schema.Desired {
	t.Helper()
	d, err := schema.Load(fstest.MapFS{"spec.dstack.yml": &fstest.MapFile{Data: []byte(src)}})
	if err != nil {
		t.Fatalf("the schema refuses the spec: %v", err)
	}
	return d
}

func TestCodePaths_refusesLocalPathsOutsideTheSpecRepository(t *testing.T) {
	d := load(t, "type: task\nimage: x\ncommands: [ok]\nrepos: [..]\nfiles: [/etc/passwd, ../x:/x, a/../../y, b]\n")
	got := CodePaths(&d.Resources[0])
	want := []string{"4:9: repos[0]: \"..\" is outside the spec repository", "5:9: files[0]: \"/etc/passwd\" is outside",
		"5:22: files[1]: \"../x\" is outside", "5:31: files[2]: \"a/../../y\" is outside"}
	if len(got) != len(want) {
		t.Fatalf("got %d errors %q, want %d %q", len(got), got.Error(), len(want), want)
	}
	for i, e := range got {
		if !strings.Contains(e.Error(), want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), want[i])
		}
	}
	// The same spec one directory down names paths of the repository.
	if got := CodePathsAt(&d.Resources[0], "specs/spec.dstack.yml"); len(got) != 1 {
		t.Errorf("CodePathsAt in specs/ = %q, want /etc/passwd only", got.Error())
	}
}

func TestCodePaths_refusesCredentialsInARepoURLAndFileURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://user:s3cret@git.example.com/r.git", "credentials in `url` are not accepted"},
		{"file:///srv/git/r.git", "file urls are not fetched"},
		{"https://git.example.com/r.git", ""},
		{"git@github.com:org/r.git", ""},
	} {
		d := load(t, "type: task\nimage: x\ncommands: [ok]\nrepos:\n  - url: "+tc.url+"\n")
		got := CodePaths(&d.Resources[0]).Error()
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || strings.Contains(got, "s3cret") {
			t.Errorf("CodePaths of url %s = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestCheck_refusesWhatTheRuntimeDoesNotDo(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // "line:col: message fragment", in order
	}{
		{"a network volume by name is honoured", "type: task\nimage: x\ncommands: [ok]\nvolumes:\n  - name: data\n    path: /data\n", nil},
		{"a network volume in the short form is honoured", "type: task\nimage: x\ncommands: [ok]\nvolumes:\n  - /host:/in\n  - data:/data\n", nil},
		{"an instance volume is honoured", "type: task\nimage: x\ncommands: [ok]\nvolumes:\n  - instance_path: /srv\n    path: /srv\n", nil},
		{"local repos and files of the spec repository are honoured", "type: task\nimage: x\ncommands: [ok]\nrepos: [.]\nfiles: [{local_path: a, path: /srv/a}, b/c:d]\n", nil},
		{"a repo by url is honoured", "type: task\nimage: x\ncommands: [ok]\nrepos: [https://github.com/dstackai/dstack]\n", nil},
		{"an entrypoint is honoured", "type: task\nimage: x\ncommands: [ok]\nentrypoint: python -c 'print(1)'\n", nil},
		{"an entrypoint with an unclosed quote", "type: task\nimage: x\nentrypoint: \"sh -c 'echo\"\n", []string{"3:13: entrypoint: not supported"}},
		{"a multi-node task is honoured", "type: task\nimage: x\ncommands: [ok]\nnodes: 2\n", nil},
		{"one node is honoured", "type: task\nimage: x\ncommands: [ok]\nnodes: 1\n", nil},
		{"task groups are honoured", "type: task\nimage: x\ngroups:\n  - name: a\n    commands: [ok]\n  - name: b\n    nodes: 2\n    commands: [ok]\n", nil},
		{"a service replica range with scaling is honoured", "type: service\nimage: x\ncommands: [ok]\nport: 80\nreplicas: 0..3\nscaling: {metric: rps, target: 10}\n", nil},
		{"a fixed replica count is honoured", "type: service\nimage: x\ncommands: [ok]\nport: 80\nreplicas: 3\n", nil},
		{"the default gateway needs one; an openai model and rate limits are honoured", "type: service\nimage: x\ncommands: [ok]\nport: 80\ngateway: true\nmodel: llama\nrate_limits: [{rps: 1}]\n",
			[]string{"5:10: gateway: the service asks for the default gateway"}},
		{"a rate limit keyed by a header is honoured", "type: service\nimage: x\ncommands: [ok]\nport: 80\nrate_limits:\n  - rps: 1\n  - prefix: /api\n    rps: 2\n    key: {type: header, header: X-Key}\n", nil},
		{"a tgi model is honoured", "type: service\nimage: x\ncommands: [ok]\nport: 80\nmodel: {type: chat, name: llama, format: tgi}\n", nil},
		{"env: [NAME] is taken from the project's secrets", "type: task\nimage: x\ncommands: [ok]\nenv:\n  - A=1\n  - HF_TOKEN\n", nil},
		{"run backends are honoured, a long stop_duration is not", "type: task\nimage: x\ncommands: [ok]\nbackends: [aws]\nstop_duration: 5m\n",
			[]string{"5:16: stop_duration: not supported"}},
		{"a secret in registry_auth is honoured", "type: task\nimage: x\ncommands: [ok]\nregistry_auth:\n  username: u\n  password: ${{ secrets.REG }}\n", nil},
		{"registry_auth as written is honoured", "type: task\nimage: x\ncommands: [ok]\nregistry_auth:\n  username: u\n  password: p\n", nil},
		{"the default stop_duration is accepted", "type: task\nimage: x\ncommands: [ok]\nstop_duration: 10s\n", nil},
		{"explicit resources.disk on a run", "type: task\nimage: x\ncommands: [ok]\nresources:\n  disk: 200GB\n", []string{"5:9: resources.disk: not supported"}},
		{"a dev environment's IDE, its version and inactivity_duration are honoured",
			"type: dev-environment\nimage: x\nide: vscode\nversion: f1a4fb1\ninactivity_duration: 2h\n", nil},
		{"zed with a version", "type: dev-environment\nimage: x\nide: zed\nversion: 0.200.1\n", []string{"4:10: version: not supported"}},
		{"zed without a version is honoured", "type: dev-environment\nimage: x\nide: zed\n", nil},
		{"a cluster fleet is accepted", "type: fleet\nnodes: 2\nplacement: cluster\n", nil},
		{"an SSH host's ssh_key, not its blocks", "type: fleet\nssh_config:\n  user: u\n  identity_file: k\n  hosts:\n    - hostname: h\n      blocks: 2\n      ssh_key: {private: x}\n",
			[]string{"8:16: ssh_config.hosts[0].ssh_key: not supported"}},
		{"a volume is honoured", "type: volume\nname: vol\nbackend: aws\nregion: us-east-1\nsize: 100\n", nil},
		{"an azure volume is honoured", "type: volume\nname: vol\nbackend: azure\nregion: eastus\nvolume_id: d\n", nil},
		{"a volume's availability zone", "type: volume\nname: vol\nbackend: gcp\nregion: r\navailability_zone: r-a\nsize: 1\n",
			[]string{"5:20: availability_zone: not supported yet by hoist: `availability_zone`"}},
		{"a kubernetes claim is honoured", "type: volume\nname: vol\nbackend: kubernetes\nclaim_name: c\nread_only: true\n", nil},
		{"a kubernetes volume hoist creates is honoured",
			"type: volume\nname: vol\nbackend: kubernetes\nsize: 1GB\nstorage_class_name: fast\naccess_modes: [ReadWriteMany]\n", nil},
		{"a runpod volume is honoured", "type: volume\nname: vol\nbackend: runpod\nregion: US-TX-3\nsize: 10\n", nil},
		{"a gateway is honoured", "type: gateway\nname: gw\nbackend: aws\nregion: us-east-1\ndomain: example.com\ninstance_type: t3.micro\ntags: {a: b}\n", nil},
		{"a local gateway without a certificate is honoured", "type: gateway\nname: gw\nbackend: local\nregion: local\ndomain: example.com\ncertificate: null\n", nil},
		{"a kubernetes gateway", "type: gateway\nname: gw\nbackend: kubernetes\nregion: r\ndomain: example.com\n",
			[]string{"3:10: backend: not supported yet by hoist: `kubernetes`"}},
		{"gateway replicas, an acm certificate, a private gateway and a router",
			"type: gateway\nname: gw\nbackend: aws\nregion: r\ndomain: example.com\nreplicas: 2\ncertificate: {type: acm, arn: a}\npublic_ip: false\nrouter: {type: sglang}\n",
			[]string{"6:11: replicas: not supported", "7:14: certificate: not supported", "8:12: public_ip: not supported", "9:9: router: not supported"}},
		{"a plain task", "type: task\nimage: x\ncommands: [ok]\nenv: [A=1]\nports: [8080]\nretry: true\nmax_duration: 1h\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckAll(load(t, tc.src))
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors %q, want %d %q", len(got), got.Error(), len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if s := got[i].Error(); !strings.HasPrefix(s, "spec.dstack.yml:"+w) {
					t.Errorf("error %d = %q, want prefix spec.dstack.yml:%s", i, s, w)
				}
			}
		})
	}
}

func TestWarnings_nameAdvisoryFields(t *testing.T) {
	d := load(t, "type: service\nimage: x\ncommands: [ok]\nport: 80\nhttps: false\npriority: 5\ntags: {team: a}\n")
	got := WarningsAll(d)
	want := []string{"6:11: priority:", "7:7: tags:"}
	if len(got) != len(want) {
		t.Fatalf("warnings = %q, want %q", got.Error(), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), "spec.dstack.yml:"+w) {
			t.Errorf("warning %d = %q, want prefix %s", i, got[i].Error(), w)
		}
	}
	if errs := CheckAll(d); len(errs) != 0 {
		t.Errorf("advisory fields gave errors: %v", errs)
	}
}

var update = flag.Bool("update", false, "rewrite README.md's support table from the code")

// TestReadme_supportTableIsCurrent fails when the README's support table
// differs from Markdown() (what `hoist schema --support` prints); -update
// rewrites it.
func TestReadme_supportTableIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok1 := strings.Cut(string(b), ReadmeBegin+"\n")
	block, tail, ok2 := strings.Cut(rest, ReadmeEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md has no %s … %s block", ReadmeBegin, ReadmeEnd)
	}
	if block == Markdown() {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+ReadmeBegin+"\n"+Markdown()+ReadmeEnd+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's support table is stale: run go test ./reconciler/support -run TestReadme -update")
}

// TestCorpus_realConfigs reports how many of the real dstack
// configurations hoist runs and the most common refusals (the configs
// must all keep passing the schema).
func TestCorpus_realConfigs(t *testing.T) {
	dir := os.Getenv("HOIST_DSTACK_CONFIGS")
	if dir == "" {
		t.Skip("set HOIST_DSTACK_CONFIGS to a directory of dstack configurations")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
	runs, refused := 0, 0
	reasons := map[string]int{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := schema.Load(fstest.MapFS{"spec.dstack.yml": &fstest.MapFile{Data: src}})
		if err != nil {
			t.Errorf("%s: the schema refuses it: %v", filepath.Base(f), err)
			continue
		}
		errs := CheckAll(d)
		if len(errs) == 0 {
			runs++
			continue
		}
		refused++
		seen := map[string]bool{}
		for _, e := range errs {
			_, what, _ := strings.Cut(e.Msg, RefusedPrefix)
			what, _, _ = strings.Cut(what, " (")
			if !seen[what] {
				seen[what] = true
				reasons[what]++
			}
		}
	}
	type kv struct {
		k string
		n int
	}
	var top []kv
	for k, n := range reasons {
		top = append(top, kv{k, n})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n || top[i].n == top[j].n && top[i].k < top[j].k })
	t.Logf("%d configurations: %d run, %d refused", len(files), runs, refused)
	for _, x := range top {
		t.Logf("%3d  %s", x.n, x.k)
	}
}

// TestCheckAll_refusesGatewayReferencesTheRevisionCannotServe: a service
// naming a gateway the revision does not declare, or served by a gateway
// without a domain, is refused with the revision, at the field.
func TestCheckAll_refusesGatewayReferencesTheRevisionCannotServe(t *testing.T) {
	d, err := schema.Load(fstest.MapFS{
		"a.dstack.yml":  &fstest.MapFile{Data: []byte("type: service\nname: sa\nimage: x\ncommands: [ok]\nport: 80\ngateway: nope\n")},
		"b.dstack.yml":  &fstest.MapFile{Data: []byte("type: service\nname: sb\nimage: x\ncommands: [ok]\nport: 80\ngateway: gw\n")},
		"c.dstack.yml":  &fstest.MapFile{Data: []byte("type: service\nname: sc\nimage: x\ncommands: [ok]\nport: 80\ngateway: false\n")},
		"gw.dstack.yml": &fstest.MapFile{Data: []byte("type: gateway\nname: gw\nbackend: aws\nregion: r\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := CheckAll(d)
	want := []string{`a.dstack.yml:6:10: gateway: gateway "nope" is not declared`, `b.dstack.yml:6:10: gateway: gateway "gw" has no domain`}
	if len(got) != len(want) {
		t.Fatalf("errors = %q, want %q", got.Error(), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, got[i].Error(), w)
		}
	}
}
