package vastai

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/podcloud"
	"hoist/e2e/cloudsim/sim"
	vastsim "hoist/e2e/cloudsim/vastai"
)

// simEnv is the cloud simulator's Vast.ai served in the test's process.
type simEnv struct {
	sim      *sim.Sim
	prov     *vastsim.Provider
	endpoint string
	srv      *httptest.Server
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	s, err := sim.New(sim.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	prov := vastsim.New().(*vastsim.Provider)
	srv := httptest.NewServer(prov.Handler(s))
	t.Cleanup(func() {
		srv.Close()
		for _, r := range s.List(vastsim.Name, vastsim.KindPod) {
			_ = s.StopPod(vastsim.Name, r.ID)
		}
		s.Close()
	})
	entry := prov.Backend(s, srv.URL)
	return &simEnv{sim: s, prov: prov, endpoint: entry["endpoint_url"].(string), srv: srv}
}

// options are the simulator's backend entry as Options, changed by edit.
func (e *simEnv) options(edit func(*Options)) Options {
	community := true
	o := Options{
		Creds:          &Creds{Type: "api_key", APIKey: vastsim.APIKey},
		CommunityCloud: &community,
		EndpointURL:    e.endpoint,
	}
	if edit != nil {
		edit(&o)
	}
	return o
}

func (e *simEnv) provider(t *testing.T, edit func(*Options)) *Provider {
	t.Helper()
	p, err := NewProvider(e.options(edit), &http.Client{Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTags are a pod's ownership tags for task task of installation inst.
func testTags(inst, task string) map[string]string {
	return map[string]string{
		backends.TagInstallation: inst, backends.TagProject: "main", backends.TagResource: "run/train",
		backends.TagInstance: "inst-" + task, podcloud.TagTask: task,
	}
}

// waitPod polls pod id until done says so.
func waitPod(t *testing.T, p *Provider, id string, what string, done func(podcloud.Pod) bool) podcloud.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pod, err := p.GetPod(t.Context(), id)
		if err != nil {
			t.Fatalf("get pod %s: %v", id, err)
		}
		if done(pod) {
			return pod
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not %s: %+v", id, what, pod)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
