package reconciler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"hoist/store"
)

// hfStandIn is the Hugging Face Hub's file endpoint for two models: a
// public one, and a gated one that needs the token hf_good. It records the
// Authorization header of each request.
func hfStandIn(t *testing.T) (url string, auths func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	const cfg = `{"bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": false, "special": true},
		"chat_template": "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/org/public-llm/resolve/main/tokenizer_config.json":
		case "/org/gated-llm/resolve/main/tokenizer_config.json":
			if r.Header.Get("Authorization") != "Bearer hf_good" {
				http.Error(w, "gated", http.StatusUnauthorized)
				return
			}
		case "/org/named-llm/resolve/main/tokenizer_config.json":
			_, _ = w.Write([]byte(`{"eos_token": "<|end|>", "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "chat"}]}`))
			return
		default:
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(cfg))
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestServices_tgiModelTemplateIsFetchedFromTheHub: a `format: tgi` model
// without chat_template or eos_token gets them from its
// tokenizer_config.json at HF_ENDPOINT when the run is first reconciled,
// with the run's HF_TOKEN when its env has one, and its route carries them;
// a spec that gives both asks nothing; a gated model without a token, or an
// unknown one, fails the run with a message saying why.
func TestServices_tgiModelTemplateIsFetchedFromTheHub(t *testing.T) {
	svc := func(model, extra string) string {
		return "type: service\nname: llm\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\n" +
			"model: {type: chat, name: " + model + ", format: tgi" + extra + "}\n"
	}
	for _, tc := range []struct {
		name, spec    string
		wantAuth      []string
		template, eos string
		secret        string
		fails         string
	}{
		{name: "public model without a token", spec: svc("org/public-llm", ""), wantAuth: []string{""},
			template: "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}", eos: "</s>"},
		{name: "gated model with HF_TOKEN from the env", spec: svc("org/gated-llm", "") + "env: {HF_TOKEN: hf_good}\n",
			wantAuth: []string{"Bearer hf_good"}, template: "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}", eos: "</s>"},
		{name: "gated model with HF_TOKEN from the project's secret", spec: svc("org/gated-llm", "") + "env: [HF_TOKEN]\n",
			secret: "hf_good", wantAuth: []string{"Bearer hf_good"}, template: "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}", eos: "</s>"},
		{name: "named templates: the default one", spec: svc("org/named-llm", ""), wantAuth: []string{""}, template: "chat", eos: "<|end|>"},
		{name: "the spec's template and token are not fetched", spec: svc("org/public-llm", `, chat_template: "{{ messages }}", eos_token: "<eot>"`),
			template: "{{ messages }}", eos: "<eot>"},
		{name: "only the missing token is taken", spec: svc("org/public-llm", `, chat_template: "mine"`), wantAuth: []string{""},
			template: "mine", eos: "</s>"},
		{name: "gated model without a token fails the run", spec: svc("org/gated-llm", ""), wantAuth: []string{""},
			fails: "failed to access gated model org/gated-llm (401 Unauthorized); set HF_TOKEN in the service's env"},
		{name: "gated model with a wrong token fails the run", spec: svc("org/gated-llm", "") + "env: {HF_TOKEN: hf_bad}\n",
			wantAuth: []string{"Bearer hf_bad"}, fails: "the service's HF_TOKEN is not valid for it"},
		{name: "unknown model fails the run", spec: svc("org/nope", ""), wantAuth: []string{""}, fails: "404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint, auths := hfStandIn(t)
			f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "llm.dstack.yml": tc.spec})
			f.c.cfg.HFEndpoint = endpoint
			if tc.secret != "" {
				if err := f.st.SetSecret(f.ctx, "", "HF_TOKEN", []byte(tc.secret)); err != nil {
					t.Fatal(err)
				}
			}
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			f.reconcileRun("llm")
			if got := auths(); strings.Join(got, ",") != strings.Join(tc.wantAuth, ",") {
				t.Fatalf("the Hub got Authorization %q, want %q", got, tc.wantAuth)
			}
			run := f.run("llm")
			if tc.fails != "" {
				if run.Status != store.RunTerminating || run.TerminationReason != runReasonServerError || !strings.Contains(run.StatusMessage, tc.fails) {
					t.Fatalf("run %s (%s) %q, want terminating (server_error) saying %q", run.Status, run.TerminationReason, run.StatusMessage, tc.fails)
				}
				if models, err := f.c.ServiceModels(f.ctx, store.DefaultProject); err != nil || len(models) != 1 || models[0].Model.ChatTemplate != "" {
					t.Fatalf("models of a failing run = %+v, %v; want the run with no template", models, err)
				}
				f.reconcileRun("llm") // stops its jobs
				f.reconcileJobs("llm")
				f.reconcileRun("llm")
				if run := f.run("llm"); run.Status != store.RunFailed || !strings.Contains(run.StatusMessage, tc.fails) {
					t.Fatalf("run %s %q, want failed saying %q", run.Status, run.StatusMessage, tc.fails)
				}
				return
			}
			if run.Status == store.RunTerminating {
				t.Fatalf("run terminating: %s", run.StatusMessage)
			}
			models, err := f.c.ServiceModels(f.ctx, store.DefaultProject)
			if err != nil || len(models) != 1 {
				t.Fatalf("models = %+v, %v", models, err)
			}
			if m := models[0].Model; m.ChatTemplate != tc.template || m.EOSToken != tc.eos || m.Format != "tgi" {
				t.Fatalf("model = %+v, want template %q and eos %q", m, tc.template, tc.eos)
			}
			f.reconcileRun("llm")
			if n := len(auths()); n != len(tc.wantAuth) {
				t.Fatalf("the Hub was asked %d times after a second reconcile, want %d", n, len(tc.wantAuth))
			}
		})
	}
}

// TestServices_routeCarriesRateLimitsKeyedByAHeader: a rate limit with
// `key: {type: header}` reaches the route with its header name; one keyed
// by client address has none.
func TestServices_routeCarriesRateLimitsKeyedByAHeader(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\n" +
		"commands: [sleep 1h]\nrate_limits:\n  - prefix: /api\n    rps: 2\n    key: {type: header, header: X-Api-Key}\n  - prefix: /\n    rps: 1\n"})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	rt, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web")
	if err != nil {
		t.Fatal(err)
	}
	want := []ServiceRateLimit{{Prefix: "/api", Header: "X-Api-Key", RPS: 2}, {Prefix: "/", RPS: 1}}
	if len(rt.RateLimits) != 2 || rt.RateLimits[0] != want[0] || rt.RateLimits[1] != want[1] {
		t.Fatalf("rate limits = %+v, want %+v", rt.RateLimits, want)
	}
}
