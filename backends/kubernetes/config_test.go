package kubernetes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"hoist/backends"
)

// testKubeconfig has two contexts on two servers; "a" is current and
// names no namespace, "b" names namespace team-b.
const testKubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: ca
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
- name: cb
  cluster: {server: "https://127.0.0.2:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret}
contexts:
- name: a
  context: {cluster: ca, user: u}
- name: b
  context: {cluster: cb, user: u, namespace: team-b}
`

// decodeOptions decodes an entry's options the way the server hands them
// to the factory (JSON, unknown keys refused).
func decodeOptions(t *testing.T, js string) (Options, error) {
	t.Helper()
	var o Options
	err := backends.Config{Name: "k8s", Type: "kubernetes", Options: json.RawMessage(js)}.Decode(&o)
	return o, err
}

func TestResolve_acceptsDstacksEntry(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(testKubeconfig)
	tests := []struct {
		name          string
		options       string
		wantHost      string
		wantRegion    string
		wantNamespace string
		wantTimeout   time.Duration
		wantJump      bool
	}{
		{
			name:     "a kubeconfig file uses its current context and the default namespace",
			options:  `{"kubeconfig": {"filename": "` + file + `"}}`,
			wantHost: "https://127.0.0.1:6443", wantRegion: "a", wantNamespace: "default", wantTimeout: DefaultUnschedulableTimeout,
		},
		{
			name:     "kubeconfig data and the entry's namespace",
			options:  `{"kubeconfig": {"data": ` + string(data) + `}, "namespace": "hoist-jobs"}`,
			wantHost: "https://127.0.0.1:6443", wantRegion: "a", wantNamespace: "hoist-jobs", wantTimeout: DefaultUnschedulableTimeout,
		},
		{
			name:     "a context by name takes its own namespace",
			options:  `{"kubeconfig": {"filename": "` + file + `"}, "contexts": ["b"]}`,
			wantHost: "https://127.0.0.2:6443", wantRegion: "b", wantNamespace: "team-b", wantTimeout: DefaultUnschedulableTimeout,
		},
		{
			name:     "a context with a proxy jump is accepted, the jump only noted",
			options:  `{"kubeconfig": {"filename": "` + file + `"}, "contexts": [{"name": "b", "proxy_jump": {"hostname": "1.2.3.4", "port": 32000}}]}`,
			wantHost: "https://127.0.0.2:6443", wantRegion: "b", wantNamespace: "team-b", wantTimeout: DefaultUnschedulableTimeout, wantJump: true,
		},
		{
			name:     "the legacy proxy_jump, a price and a longer unschedulable timeout",
			options:  `{"kubeconfig": {"filename": "` + file + `"}, "proxy_jump": {"hostname": "1.2.3.4", "port": 32000}, "price": {"cpu": 0.01, "memory": 0.002, "gpu": 1.5}, "unschedulable_timeout": "45s"}`,
			wantHost: "https://127.0.0.1:6443", wantRegion: "a", wantNamespace: "default", wantTimeout: 45 * time.Second, wantJump: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := decodeOptions(t, tt.options)
			if err != nil {
				t.Fatal(err)
			}
			s, err := o.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if s.rest.Host != tt.wantHost || s.region != tt.wantRegion || s.namespace != tt.wantNamespace ||
				s.unschedulableTimeout != tt.wantTimeout || s.proxyJump != tt.wantJump {
				t.Errorf("resolve = host %s region %s namespace %s timeout %s jump %t; want %s %s %s %s %t",
					s.rest.Host, s.region, s.namespace, s.unschedulableTimeout, s.proxyJump,
					tt.wantHost, tt.wantRegion, tt.wantNamespace, tt.wantTimeout, tt.wantJump)
			}
			if s.rest.BearerToken != "secret" {
				t.Errorf("credentials not taken from the kubeconfig: %+v", s.rest)
			}
		})
	}
}

func TestResolve_refusesWhatCannotWork(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := `"kubeconfig": {"filename": "` + file + `"}`
	tests := []struct {
		name, options, want string
	}{
		{"an unknown key", `{` + kc + `, "regions": ["x"]}`, "unknown field"},
		{"an unknown key in a context", `{` + kc + `, "contexts": [{"name": "a", "namespace": "x"}]}`, "unknown field"},
		{"a missing kubeconfig file", `{"kubeconfig": {"filename": "/nonexistent/kubeconfig"}}`, "kubeconfig.filename"},
		{"an empty kubeconfig", `{"kubeconfig": {}}`, "filename or data is required"},
		{"garbage kubeconfig data", `{"kubeconfig": {"data": "{{{"}}`, "kubeconfig.data"},
		{"an unknown context", `{` + kc + `, "contexts": ["c"]}`, `context "c" not found`},
		{"two contexts", `{` + kc + `, "contexts": ["a", "b"]}`, "one entry per context"},
		{"a namespace that is no DNS label", `{` + kc + `, "namespace": "Team_A"}`, `namespace "Team_A"`},
		{"a bad unschedulable timeout", `{` + kc + `, "unschedulable_timeout": "soon"}`, "unschedulable_timeout"},
		{"a negative unschedulable timeout", `{` + kc + `, "unschedulable_timeout": "-1s"}`, "positive"},
		{"a negative price", `{` + kc + `, "price": {"gpu": -1}}`, "negative"},
		{"a context without a kubeconfig", `{"contexts": ["a"]}`, "needs a kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := decodeOptions(t, tt.options)
			if err == nil {
				_, err = o.resolve()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestResolve_inClusterWithoutKubeconfig(t *testing.T) {
	old := inClusterConfig
	t.Cleanup(func() { inClusterConfig = old })

	inClusterConfig = func() (*rest.Config, error) { return &rest.Config{Host: "https://10.96.0.1:443"}, nil }
	s, err := Options{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.rest.Host != "https://10.96.0.1:443" || s.region != inClusterRegion || s.namespace != DefaultNamespace {
		t.Errorf("in-cluster: host %s region %s namespace %s", s.rest.Host, s.region, s.namespace)
	}

	inClusterConfig = func() (*rest.Config, error) { return nil, rest.ErrNotInCluster }
	if _, err := (Options{}).resolve(); !errors.Is(err, rest.ErrNotInCluster) || !strings.Contains(err.Error(), "kubeconfig is required") {
		t.Errorf("outside a cluster: err = %v, want one saying a kubeconfig is required", err)
	}
}

func TestFactory_refusesBadOptionsAsStalled(t *testing.T) {
	_, err := Factory(backends.Config{Name: "k8s", Type: "kubernetes", Options: json.RawMessage(`{"kubeconfig": {}}`)}, backends.Deps{})
	if !backends.IsStalled(err) {
		t.Fatalf("Factory = %v, want a stalled error", err)
	}
}

func TestPrice_sumsTheSlicesRates(t *testing.T) {
	p := PriceOptions{CPU: 0.02, Memory: 0.005, GPU: 2}
	if got, want := p.of(4, 16, 1), 4*0.02+16*0.005+2; got != want {
		t.Errorf("price = %v, want %v", got, want)
	}
}
