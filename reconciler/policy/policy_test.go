package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/schema"
)

// testEnv is a server with a local and an SSH backend whose data directory
// and a granted directory live in a temp dir with a few symlinks.
func testEnv(t *testing.T) (Env, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"data", "srv/datasets/sub", "srv/scratch", "srv/other"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"srv/datasets/to-etc":    "/etc",
		"srv/datasets/to-data":   filepath.Join(dir, "data"),
		"srv/datasets/to-other":  filepath.Join(dir, "srv/other"),
		"srv/datasets/dangling":  "/etc/hoist-policy-test-missing",
		"srv/datasets/to-inside": filepath.Join(dir, "srv/datasets/sub"),
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	return Env{
		Project: "main", Backends: []string{"local", "ssh"}, LocalBackends: []string{"local"}, RemoteBackends: []string{"ssh"},
		DataDir: filepath.Join(dir, "data"), DockerHost: "unix:///tmp/hoist-policy-test/docker.sock",
		AgentDirs: []string{"/opt/hoist-agents"}, Resolve: ResolveSymlinks,
	}, dir
}

func TestInstanceVolume(t *testing.T) {
	env, dir := testEnv(t)
	cfg := Config{
		Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: filepath.Join(dir, "srv/datasets")}, {Path: "/var"}}},
		Backends: map[string]Grant{
			"ssh": {InstanceVolumes: []VolumeGrant{{Path: "/mnt/shared", ReadWrite: true}}},
		},
		Projects: map[string]ProjectConfig{"main": {Backends: map[string]Grant{
			"local": {InstanceVolumes: []VolumeGrant{{Path: filepath.Join(dir, "srv/scratch"), ReadWrite: true}}},
		}}},
	}
	p, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "srv/datasets")
	for _, tc := range []struct {
		name, backend, path string
		want                Access
		reason              string // a part of Reason
	}{
		{"a granted directory is mounted read-only", "local", ds, Access{Allowed: true}, ""},
		{"a path below a granted directory is mounted read-only", "local", ds + "/imagenet/train", Access{Allowed: true}, ""},
		{"a grant with read_write mounts writable", "local", filepath.Join(dir, "srv/scratch/run1"), Access{Allowed: true, ReadWrite: true}, ""},
		{"a project's backend grant does not reach another backend", "ssh", filepath.Join(dir, "srv/scratch"), Access{}, "policy.instance_volumes or policy.backends.ssh.instance_volumes"},
		{"a backend grant applies on that backend", "ssh", "/mnt/shared/x", Access{Allowed: true, ReadWrite: true}, ""},
		{"a backend grant does not apply on another", "local", "/mnt/shared", Access{}, "not allowed on backend local"},
		{"a path beside a grant is refused naming the setting", "local", filepath.Join(dir, "srv/other"), Access{}, "allow it with policy.instance_volumes or policy.backends.local.instance_volumes in the server config"},
		{"a prefix match is not a directory match", "local", ds + "-evil", Access{}, "not allowed"},
		{"the root is never mountable", "local", "/", Access{HardDenied: true}, "/ contains /etc"},
		{"the root is never mountable on SSH hosts", "ssh", "/", Access{HardDenied: true}, "never mountable"},
		{"/etc is never mountable", "ssh", "/etc", Access{HardDenied: true}, "/etc is a system directory"},
		{"a path below /root is never mountable", "local", "/root/.cache", Access{HardDenied: true}, "inside /root"},
		{"/proc, /sys, /dev and /boot are never mountable", "local", "/dev/sda", Access{HardDenied: true}, "inside /dev"},
		{"the Docker socket is never mountable", "local", "/var/run/docker.sock", Access{HardDenied: true}, "the Docker socket"},
		{"the socket DOCKER_HOST names is never mountable", "ssh", "/tmp/hoist-policy-test/docker.sock", Access{HardDenied: true}, "the Docker socket"},
		{"a granted prefix does not open a denied path inside it", "local", "/var/run", Access{HardDenied: true}, "contains /var/run/docker.sock"},
		{"the data directory is never mountable", "local", env.DataDir, Access{HardDenied: true}, "the server's data directory"},
		{"a file of the data directory is never mountable", "local", env.DataDir + "/secret.key", Access{HardDenied: true}, "inside"},
		{"a directory holding the data directory is never mountable", "local", dir, Access{HardDenied: true}, "contains " + env.DataDir},
		{"the agents' state is never mountable", "ssh", "/opt/hoist-agents/tasks", Access{HardDenied: true}, "the agents' state"},
		{"a symlink to /etc inside a grant is refused", "local", ds + "/to-etc", Access{HardDenied: true}, "resolves to /etc"},
		{"a symlink to the data directory inside a grant is refused", "local", ds + "/to-data/hoist.db", Access{HardDenied: true}, "the server's data directory"},
		{"a symlink leading out of a grant is refused", "local", ds + "/to-other", Access{}, "not allowed"},
		{"a symlink staying inside a grant is allowed", "local", ds + "/to-inside", Access{Allowed: true}, ""},
		{"a dangling symlink is refused", "local", ds + "/dangling", Access{HardDenied: true}, "resolve"},
		{"symlinks are not resolved for SSH hosts", "ssh", "/mnt/shared/anything", Access{Allowed: true, ReadWrite: true}, ""},
		{"a path with .. is refused", "local", ds + "/../other", Access{HardDenied: true}, `holds ".."`},
		{"a relative path is refused", "local", "srv/datasets", Access{HardDenied: true}, "not an absolute path"},
		{"duplicate slashes are cleaned before the check", "local", "//etc//", Access{HardDenied: true}, "/etc is a system directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.InstanceVolume(tc.backend, tc.path)
			if got.Allowed != tc.want.Allowed || got.ReadWrite != tc.want.ReadWrite || got.HardDenied != tc.want.HardDenied {
				t.Fatalf("InstanceVolume(%s, %s) = %+v, want %+v", tc.backend, tc.path, got, tc.want)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Fatalf("reason %q does not mention %q", got.Reason, tc.reason)
			}
		})
	}
}

func TestNew_refusesWhatCanNeverBeAllowed(t *testing.T) {
	env, dir := testEnv(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"granting / is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: "/"}}}},
			"policy.instance_volumes[0].path: / can never be mounted"},
		{"granting a path below /etc is refused", Config{Backends: map[string]Grant{"ssh": {InstanceVolumes: []VolumeGrant{{Path: "/etc/ssl"}}}}},
			"policy.backends.ssh.instance_volumes[0].path: /etc/ssl can never be mounted: /etc/ssl is inside /etc"},
		{"granting the data directory is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: env.DataDir}}}},
			"the server's data directory"},
		{"granting a symlink to /etc is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: dir + "/srv/datasets/to-etc"}}}},
			"can never be mounted"},
		{"granting the Docker socket is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: "/run/docker.sock", ReadWrite: true}}}},
			"the Docker socket"},
		{"a relative grant is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: "data"}}}},
			"not an absolute path"},
		{"a grant with .. is refused", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: "/srv/../etc"}}}},
			`holds ".."`},
		{"an unknown backend is refused", Config{Backends: map[string]Grant{"aws": {Privileged: true}}},
			`policy.backends.aws: no backend "aws" is configured`},
		{"another project is refused", Config{Projects: map[string]ProjectConfig{"other": {}}},
			`policy.projects.other: this server reconciles no project "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func load(t *testing.T, files map[string]string) *schema.Resource {
	t.Helper()
	fsys := fstest.MapFS{}
	for n, b := range files {
		fsys[n] = &fstest.MapFile{Data: []byte(b)}
	}
	d, err := schema.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return &d.Resources[0]
}

func TestCheck(t *testing.T) {
	env, dir := testEnv(t)
	ds := dir + "/srv/datasets"
	for _, tc := range []struct {
		name string
		cfg  Config
		spec string
		want []string // every error, as "file:line:col: message" parts
	}{
		{"a task mounting / is refused at the volume", Config{},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - /:/host\n",
			[]string{"t.dstack.yml:5:5: volumes[0]: instance path / is never mountable"}},
		{"the object form is refused at the volume", Config{},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - path: /d\n    instance_path: /var/run/docker.sock\n",
			[]string{"t.dstack.yml:5:5: volumes[0]: instance path /var/run/docker.sock is never mountable"}},
		{"an ungranted path names the setting", Config{},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - " + ds + ":/data\n",
			[]string{"volumes[0]: instance path " + ds + " is not allowed on backend local: allow it with policy.instance_volumes or policy.backends.local.instance_volumes in the server config"}},
		{"a path granted on every backend passes", Config{Grant: Grant{InstanceVolumes: []VolumeGrant{{Path: ds}}}},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - " + ds + ":/data\n", nil},
		{"a path granted on one backend needs the run to name it", Config{Backends: map[string]Grant{"local": {InstanceVolumes: []VolumeGrant{{Path: ds}}}}},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - " + ds + ":/data\n",
			[]string{"not allowed on backend ssh"}},
		{"a run naming the granted backend passes", Config{Backends: map[string]Grant{"local": {InstanceVolumes: []VolumeGrant{{Path: ds}}}}},
			"type: task\nname: tt\ncommands: [id]\nbackends: [local]\nvolumes:\n  - " + ds + ":/data\n", nil},
		{"a run naming remote needs the grant of the SSH backends only", Config{Backends: map[string]Grant{"ssh": {Privileged: true}}},
			"type: task\nname: tt\ncommands: [id]\nbackends: [remote]\nprivileged: true\n", nil},
		{"a run naming a backend not configured needs every backend's grant", Config{Backends: map[string]Grant{"ssh": {Privileged: true}}},
			"type: task\nname: tt\ncommands: [id]\nbackends: [aws]\nprivileged: true\n", []string{"not allowed on backend local"}},
		{"network volumes are not host paths", Config{},
			"type: task\nname: tt\ncommands: [id]\nvolumes:\n  - name: cache\n    path: /cache\n", nil},
		{"privileged is refused by default", Config{},
			"type: task\nname: tt\ncommands: [id]\nprivileged: true\n",
			[]string{"t.dstack.yml:4:13: privileged: privileged containers are not allowed on backend local: allow them with policy.privileged or policy.backends.local.privileged in the server config"}},
		{"privileged granted to the project passes", Config{Projects: map[string]ProjectConfig{"main": {Grant: Grant{Privileged: true}}}},
			"type: task\nname: tt\ncommands: [id]\nprivileged: true\n", nil},
		{"a replica group's privileged is refused", Config{},
			"type: service\nname: ss\nport: 80\nimage: nginx\nreplicas:\n  - name: a\n    count: 1\n    commands: [x]\n    privileged: true\n",
			[]string{"t.dstack.yml:9:17: replicas[0].privileged: privileged containers are not allowed"}},
		{"fleets pass", Config{}, "type: fleet\nname: ff\nnodes: 1\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			checkErrors(t, p, tc.spec, tc.want)
		})
	}
}

func TestCheck_podBackends(t *testing.T) {
	env, _ := testEnv(t)
	env.Backends = append(env.Backends, "k8s")
	env.PodBackends = []string{"k8s"}
	for _, tc := range []struct {
		name string
		spec string
		want []string
	}{
		{"a task without commands that may land on pods is refused",
			"type: task\nname: tt\nimage: nginx\n",
			[]string{"t.dstack.yml:1:1: commands: a run that may be placed on backend k8s needs `commands` or `entrypoint`"}},
		{"an entrypoint is enough", "type: task\nname: tt\nimage: nginx\nentrypoint: /bin/run\n", nil},
		{"a run naming other backends is not checked", "type: task\nname: tt\nimage: nginx\nbackends: [local]\nuser: www\n", nil},
		{"a named user is refused at the user", "type: task\nname: tt\ncommands: [id]\nuser: www\n",
			[]string{"t.dstack.yml:4:7: user: \"www\": on backend k8s a job runs as a numeric user id"}},
		{"a numeric user passes", "type: task\nname: tt\ncommands: [id]\nuser: \"1000:1000\"\n", nil},
		{"a service's replica group commands count", "type: service\nname: ss\nport: 80\nreplicas:\n  - name: a\n    count: 1\n    commands: [x]\n", nil},
		{"a dev environment needs no commands", "type: dev-environment\nname: dd\nide: vscode\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{}, env)
			if err != nil {
				t.Fatal(err)
			}
			checkErrors(t, p, tc.spec, tc.want)
		})
	}
}

// checkErrors checks p's errors for spec (as t.dstack.yml): one for each of
// want, in order, each containing it.
func checkErrors(t *testing.T, p *Policy, spec string, want []string) {
	t.Helper()
	errs := p.Check(load(t, map[string]string{"t.dstack.yml": spec}))
	if len(errs) != len(want) {
		t.Fatalf("Check = %v, want %d errors like %q", errs, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Fatalf("error %q does not contain %q", errs[i].Error(), w)
		}
	}
}

func TestNilPolicy_allowsNothing(t *testing.T) {
	var p *Policy
	if acc := p.InstanceVolume("local", "/srv"); acc.Allowed {
		t.Fatalf("nil policy allowed a mount: %+v", acc)
	}
	if p.Privileged("local") {
		t.Fatal("nil policy allowed privileged")
	}
	r := load(t, map[string]string{"t.dstack.yml": "type: task\nname: tt\ncommands: [id]\nprivileged: true\nvolumes: [/srv:/srv]\n"})
	if errs := p.Check(r); len(errs) != 2 {
		t.Fatalf("nil policy Check = %v, want the volume and privileged refused", errs)
	}
}
