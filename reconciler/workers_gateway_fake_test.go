package reconciler

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

// withBackends gives the fixture a controller on bes (by the names specs
// use) tuned by cfg.
func (f *fixture) withBackends(bes map[string]backends.Backend, cfg Config) {
	f.t.Helper()
	cfg.Now, cfg.Owner, cfg.UnreachableGrace = f.clock.Now, "test", time.Minute
	c, err := New(cfg, Deps{Store: f.st, Source: f.c.src, Backends: bes})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	f.c = c
}

// fakeOn returns a fake backend named name on the fixture's clock.
func (f *fixture) fakeOn(name string, offs ...offers.Offer) *fake.Backend {
	be := fake.New(fake.Config{Name: name, Now: f.clock.Now, Offers: offs})
	f.t.Cleanup(func() { be.Close() })
	return be
}

// gateway returns the gateway row named name (deleted ones too).
func (f *fixture) gateway(name string) store.Gateway {
	f.t.Helper()
	gws, err := f.st.ListGateways(f.ctx, store.InfraFilter{Project: store.DefaultProject, IncludeDeleted: true})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := len(gws) - 1; i >= 0; i-- {
		if gws[i].Name == name {
			return gws[i]
		}
	}
	f.t.Fatalf("no gateway %s", name)
	return store.Gateway{}
}

// reconcileGateway runs the gateway worker once on gateway name.
func (f *fixture) reconcileGateway(name string) time.Duration {
	f.t.Helper()
	after, err := f.c.reconcileGateway(f.ctx, f.gateway(name).ID)
	if err != nil {
		f.t.Fatalf("reconcile gateway %s: %v", name, err)
	}
	return after
}

// runningGateway syncs and drives gateway name to running; it returns the
// stand-in gateway of be serving it.
func (f *fixture) runningGateway(name string, be *fake.Backend) *fake.Gateway {
	f.t.Helper()
	if res := f.sync(); res != resultSynced {
		f.t.Fatalf("sync = %s (%v)", res, f.syncState().Errors)
	}
	for range 5 {
		if f.gateway(name).Status == store.GatewayRunning {
			break
		}
		f.reconcileGateway(name)
	}
	g := f.gateway(name)
	if g.Status != store.GatewayRunning || g.InstanceID == "" || g.AdminURL == "" || g.IPAddress != "127.0.0.1" {
		f.t.Fatalf("gateway %s = %s (%q) on instance %q at %q, want running on an instance at 127.0.0.1", name, g.Status, g.StatusMessage, g.InstanceID, g.IPAddress)
	}
	gw, ok := be.Gateway(g.InstanceID)
	if !ok {
		f.t.Fatalf("no gateway runs on instance %s", g.InstanceID)
	}
	return gw
}

func serviceOf(t *testing.T, cfg api.GatewayConfig, run string) api.GatewayServiceConfig {
	t.Helper()
	for _, s := range cfg.Services {
		if s.Run == run {
			return s
		}
	}
	t.Fatalf("gateway config %+v serves no %s", cfg, run)
	return api.GatewayServiceConfig{}
}

func lastConfig(t *testing.T, gw *fake.Gateway) api.GatewayConfig {
	t.Helper()
	cfg, ok := gw.Config()
	if !ok {
		t.Fatal("no configuration was put to the gateway")
	}
	return cfg
}

const gatewaySpec = "type: gateway\nname: gw\nbackend: aws\nregion: loop\ndomain: \"*.${{ run.project_name }}.example.com\"\ndefault: true\n"

// TestGateways_provisionedAndConfiguredWithTheirServices: a gateway gets an
// instance of its backend and region (created as a gateway's), the
// gateway runs on it with an admin token, and is running once its admin
// API answers. Its configuration has the interpolated domain, the ACME
// settings of the server, the hashes of the valid tokens, and the services
// routed through it (named, or by default) with their host, https, auth,
// model, rate limits and ready replicas, reached directly on the
// gateway's own host; a replica change is put again under a new version,
// an unchanged configuration is not.
func TestGateways_provisionedAndConfiguredWithTheirServices(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"gw.dstack.yml":    gatewaySpec,
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\ngateway: gw\nhttps: auto\n" +
			"model: {type: chat, name: llama, format: openai}\nrate_limits:\n  - prefix: /api\n    rps: 2.5\n    burst: 4\n",
		"api.dstack.yml": "type: service\nname: api\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nhttps: false\nauth: false\n",
		"off.dstack.yml": "type: service\nname: off\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\ngateway: false\n",
	})
	be := f.fakeOn("aws")
	acme := &api.GatewayACME{DirectoryURL: "https://127.0.0.1:14000/dir", Email: "ops@example.com"}
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{Gateways: GatewaySettings{ACME: acme}})
	u, err := f.st.CreateUser(f.ctx, "alice", "admin")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := f.st.CreateToken(f.ctx, u.ID, "ci", time.Time{})
	if err != nil {
		t.Fatal(err)
	}

	gw := f.runningGateway("gw", be)
	g := f.gateway("gw")
	spec, ok := be.Spec(g.InstanceID)
	if !ok || !spec.Gateway || spec.Offer.Region != "loop" || spec.Offer.GPUCount != 0 || spec.Tags[backends.TagResource] != "gateway/gw" || spec.Tags[backends.TagInstance] != g.InstanceID {
		t.Fatalf("gateway instance spec = %+v, want a gateway's instance of a CPU offer in loop, tagged as the gateway's", spec)
	}
	if g.AdminToken == "" || strings.Contains(g.AdminToken, "Bearer") {
		t.Fatalf("admin token stored as %q, want it sealed", g.AdminToken)
	}

	cfg := lastConfig(t, gw)
	if cfg.Domain != "main.example.com" || cfg.TLS == nil || cfg.TLS.ACME == nil || *cfg.TLS.ACME != *acme {
		t.Fatalf("config domain %q tls %+v, want main.example.com with the server's ACME settings", cfg.Domain, cfg.TLS)
	}
	sum := sha256.Sum256([]byte(tok))
	if len(cfg.Tokens) != 1 || cfg.Tokens[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("tokens = %+v, want the hash of alice's token", cfg.Tokens)
	}
	if len(cfg.Services) != 2 {
		t.Fatalf("services = %+v, want api (by default) and web (named), not off", cfg.Services)
	}

	f.startTask("web")
	f.startTask("api")
	f.reconcileRun("web") // the model's default probe passes
	f.reconcileGateway("gw")
	cfg = lastConfig(t, gw)
	web, apiSvc := serviceOf(t, cfg, "web"), serviceOf(t, cfg, "api")
	if web.Host != "web.main.example.com" || !web.HTTPS || !web.Auth || web.MinReplicas != 1 ||
		web.Model == nil || *web.Model != (api.GatewayModel{Name: "llama", Format: "openai", Prefix: "/v1"}) ||
		len(web.RateLimits) != 1 || web.RateLimits[0] != (api.GatewayRateLimit{Prefix: "/api", RPS: 2.5, Burst: 4}) {
		t.Errorf("web = %+v, want web.main.example.com, https (auto with a certificate), auth, min 1, model llama, one rate limit", web)
	}
	if apiSvc.Host != "api.main.example.com" || apiSvc.HTTPS || apiSvc.Auth || apiSvc.Model != nil {
		t.Errorf("api = %+v, want api.main.example.com, plain HTTP, no auth, no model", apiSvc)
	}
	var rd runtimeData
	_ = json.Unmarshal(f.job("web").RuntimeData, &rd)
	if len(web.Replicas) != 1 || web.Replicas[0] != (api.GatewayReplica{JobID: f.job("web").ID, Addr: rd.ServiceAddr}) || rd.ServiceAddr == "" {
		t.Fatalf("web replicas = %+v, want its job at %s directly (same host)", web.Replicas, rd.ServiceAddr)
	}
	if len(apiSvc.Replicas) != 1 || apiSvc.Replicas[0].SSH != nil {
		t.Fatalf("api replicas = %+v, want one, direct", apiSvc.Replicas)
	}

	// Nothing changed: nothing is put.
	n, rowVersion := len(gw.Configs()), f.gateway("gw").Version
	f.reconcileGateway("gw")
	if got := len(gw.Configs()); got != n || f.gateway("gw").Version != rowVersion {
		t.Fatalf("%d configurations after an unchanged pass (row version %d, was %d), want %d and no write", got, f.gateway("gw").Version, rowVersion, n)
	}
	// The api replica ends: the gateway gets a new version without it.
	if err := f.c.terminateJob(f.ctx, f.job("api").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.reconcileGateway("gw")
	cfgs := gw.Configs()
	if len(cfgs) != n+1 || cfgs[n].Version != cfgs[n-1].Version+1 || len(serviceOf(t, cfgs[n], "api").Replicas) != 0 || len(serviceOf(t, cfgs[n], "web").Replicas) != 1 {
		t.Fatalf("configs after the api replica ended: %d (last %+v), want one more, next version, api without replicas", len(cfgs), cfgs[len(cfgs)-1])
	}
	if g := f.gateway("gw"); g.ConfigVersion != cfgs[n].Version {
		t.Errorf("stored config version %d, want %d", g.ConfigVersion, cfgs[n].Version)
	}
}

// TestGateways_givenCertificateOrNone: a gateway whose domain a configured
// certificate covers serves it instead of asking ACME; `certificate: null`
// serves plain HTTP, and `https: auto` services on it are plain HTTP.
func TestGateways_givenCertificateOrNone(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet})
	f.withBackends(map[string]backends.Backend{"aws": f.fakeOn("aws")}, Config{})
	c := f.c
	certPEM, keyPEM := selfSigned(t, "*.example.com")
	c.cfg.Gateways.Certificates = []GatewayCertificate{{CertPEM: "junk"}, {CertPEM: certPEM, KeyPEM: keyPEM}}
	le := &schema.Gateway{Certificate: &schema.Certificate{Type: "lets-encrypt"}}
	if tls := c.gatewayTLS(le, "example.com"); tls == nil || tls.CertPEM != certPEM || tls.ACME != nil {
		t.Errorf("tls for example.com = %+v, want the given certificate", tls)
	}
	if tls := c.gatewayTLS(le, "other.org"); tls == nil || tls.ACME == nil || tls.ACME.DirectoryURL != "" {
		t.Errorf("tls for other.org = %+v, want ACME at Let's Encrypt", tls)
	}
	if tls := c.gatewayTLS(&schema.Gateway{}, "example.com"); tls != nil {
		t.Errorf("tls with certificate: null = %+v, want none", tls)
	}
	for _, tc := range []struct {
		https string
		tls   bool
		want  bool
	}{{"true", true, true}, {"false", true, false}, {"auto", true, true}, {"auto", false, false}} {
		if got := serviceHTTPS(tc.https, tc.tls); got != tc.want {
			t.Errorf("https %s with tls %v = %v, want %v", tc.https, tc.tls, got, tc.want)
		}
	}
	if d := gatewayDomain("*.${{ run.project_name }}.example.com", "main"); d != "main.example.com" {
		t.Errorf("domain = %q, want main.example.com", d)
	}
}

// TestGateways_instanceTypeAndTagsReachTheInstance: without instance_type
// the gateway gets the smallest CPU offer of its region; with one, that
// offer; the spec's tags are put on the instance under hoist's own.
func TestGateways_instanceTypeAndTagsReachTheInstance(t *testing.T) {
	offs := []offers.Offer{
		{Instance: "big", Region: "loop", CPUs: 8, MemoryGB: 32, Price: 0.4, Availability: offers.AvailabilityAvailable},
		{Instance: "small", Region: "loop", CPUs: 2, MemoryGB: 4, Price: 0.05, Availability: offers.AvailabilityAvailable},
		{Instance: "tiny-elsewhere", Region: "far", CPUs: 1, MemoryGB: 1, Price: 0.01, Availability: offers.AvailabilityAvailable},
		{Instance: "gpu", Region: "loop", CPUs: 1, MemoryGB: 1, GPUCount: 1, GPUName: "A10", GPUVendor: "nvidia", Price: 0.01, Availability: offers.AvailabilityAvailable},
	}
	for _, tc := range []struct{ name, extra, want string }{
		{"the smallest CPU offer of the region", "", "small"},
		{"the named instance type", "instance_type: big\n", "big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"gw.dstack.yml": gatewaySpec + "tags: {team: ml}\n" + tc.extra})
			be := f.fakeOn("aws", offs...)
			f.withBackends(map[string]backends.Backend{"aws": be}, Config{})
			f.runningGateway("gw", be)
			spec, _ := be.Spec(f.gateway("gw").InstanceID)
			if spec.Offer.Instance != tc.want || spec.Tags["team"] != "ml" || spec.Tags[backends.TagResource] != "gateway/gw" {
				t.Fatalf("instance %s tagged %v, want %s tagged team=ml under hoist's tags", spec.Offer.Instance, spec.Tags, tc.want)
			}
		})
	}
}

// TestGateways_deleteStopsTheGatewayAndTerminatesItsInstance: a gateway
// with `hoist: {prune: true}` removed from Git is stopped and its instance
// terminated; the leak audit counts a live gateway's instance as known.
func TestGateways_deleteStopsTheGatewayAndTerminatesItsInstance(t *testing.T) {
	f := newFixture(t, map[string]string{"gw.dstack.yml": gatewaySpec + "hoist: {prune: true}\n"})
	be := f.fakeOn("aws")
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{LeakGrace: time.Nanosecond})
	gw := f.runningGateway("gw", be)
	inst := f.gateway("gw").InstanceID
	f.clock.Advance(time.Minute)
	if n := f.c.auditLeaks(f.ctx); n != 0 || !slices.Contains(be.Instances(), inst) {
		t.Fatalf("leak audit reaped %d (instances %v), want the gateway's instance kept", n, be.Instances())
	}
	f.remove("gw.dstack.yml")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	g := f.gateway("gw")
	if !g.Deleted {
		t.Fatalf("gateway deleted = %v, want deleted", g.Deleted)
	}
	f.reconcileGateway("gw")
	if g := f.gateway("gw"); g.InstanceID != "" || !gw.Stopped() || slices.Contains(be.Instances(), inst) {
		t.Fatalf("after delete: instance %q, stopped %v, backend instances %v; want stopped and terminated", g.InstanceID, gw.Stopped(), be.Instances())
	}
}

// TestGateways_failedProvisioningTerminatesTheInstance: a gateway whose
// instance never comes up fails after the provisioning timeout, with
// dstack's failed status, and its instance is terminated.
func TestGateways_failedProvisioningTerminatesTheInstance(t *testing.T) {
	f := newFixture(t, map[string]string{"gw.dstack.yml": gatewaySpec})
	be := f.fakeOn("aws")
	be.SetNeverBoots("fake-cpu", true)
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if after := f.reconcileGateway("gw"); after <= 0 || f.gateway("gw").Status != store.GatewayProvisioning {
		t.Fatalf("gateway %s, wakes in %s; want provisioning, looked at again", f.gateway("gw").Status, after)
	}
	inst := f.gateway("gw").InstanceID
	f.clock.Advance(gatewayProvisioningTimeout + time.Second)
	f.reconcileGateway("gw")
	f.reconcileGateway("gw")
	g := f.gateway("gw")
	if g.Status != store.GatewayFailed || !strings.Contains(g.StatusMessage, "did not become ready") || g.InstanceID != "" || slices.Contains(be.Instances(), inst) {
		t.Fatalf("gateway %s (%q) instance %q, backend %v; want failed, instance terminated", g.Status, g.StatusMessage, g.InstanceID, be.Instances())
	}
}

// sshFake is a fake backend that says how to log in to its hosts.
type sshFake struct{ *fake.Backend }

func (s sshFake) SSHAccess(_ context.Context, inst backends.Instance) (backends.SSHHost, error) {
	return backends.SSHHost{Hostname: "127.0.0.9", Port: 2222, User: "root", PrivateKey: []byte("KEY " + inst.ID),
		HostKeys: []string{"ssh-ed25519 AAAAfake"}, ProxyJump: &backends.SSHHost{Hostname: "127.0.0.8", User: "jump", PrivateKey: []byte("JUMP")}}, nil
}

// TestGateways_replicaOnAnotherHostIsReachedOverSSHOrFails: a replica on
// an instance of another backend is reached over SSH when its backend says
// how to log in to its hosts; otherwise the replica fails with dstack's
// gateway_error.
func TestGateways_replicaOnAnotherHostIsReachedOverSSHOrFails(t *testing.T) {
	const svc = "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\n"
	const fleet = "type: fleet\nname: cloud\nnodes: 0..2\nbackends: [gcp]\n"
	t.Run("over SSH", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": fleet, "gw.dstack.yml": gatewaySpec, "web.dstack.yml": svc})
		gwBe := f.fakeOn("aws")
		f.withBackends(map[string]backends.Backend{"aws": gwBe, "gcp": sshFake{f.fakeOn("gcp")}}, Config{})
		gw := f.runningGateway("gw", gwBe)
		inst := f.startTask("web")
		f.reconcileGateway("gw")
		reps := serviceOf(t, lastConfig(t, gw), "web").Replicas
		want := &api.GatewaySSH{Hostname: "127.0.0.9", Port: 2222, User: "root", PrivateKey: "KEY " + inst.ID, HostKeys: []string{"ssh-ed25519 AAAAfake"},
			ProxyJump: &api.GatewaySSH{Hostname: "127.0.0.8", User: "jump", PrivateKey: "JUMP"}}
		if len(reps) != 1 || reps[0].SSH == nil || reps[0].SSH.Hostname != want.Hostname || reps[0].SSH.PrivateKey != want.PrivateKey ||
			reps[0].SSH.ProxyJump == nil || reps[0].SSH.ProxyJump.User != "jump" || len(reps[0].SSH.HostKeys) != 1 {
			t.Fatalf("replicas = %+v, want one over SSH %+v", reps, want)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": fleet, "gw.dstack.yml": gatewaySpec, "web.dstack.yml": svc})
		gwBe := f.fakeOn("aws")
		f.withBackends(map[string]backends.Backend{"aws": gwBe, "gcp": f.fakeOn("gcp")}, Config{})
		gw := f.runningGateway("gw", gwBe)
		f.startTask("web")
		f.reconcileGateway("gw")
		if reps := serviceOf(t, lastConfig(t, gw), "web").Replicas; len(reps) != 0 {
			t.Fatalf("replicas = %+v, want none", reps)
		}
		j := f.job("web")
		if j.Status != store.JobTerminating || j.TerminationReason != reasonGatewayError || !strings.Contains(j.TerminationMessage, "cannot reach") {
			t.Fatalf("job %s (%s %q), want terminating with gateway_error", j.Status, j.TerminationReason, j.TerminationMessage)
		}
	})
}

// frames returns n requests a second over the last secs seconds before now.
func frames(now time.Time, secs int, n int64) []api.GatewayFrame {
	var out []api.GatewayFrame
	for i := secs - 1; i >= 0; i-- {
		out = append(out, api.GatewayFrame{Unix: now.Add(-time.Duration(i) * time.Second).Unix(), Requests: n})
	}
	return out
}

// TestGateways_statsWakeFromZeroAndDriveAutoscaling: a `replicas: 0..2`
// service on a gateway is woken when the gateway holds a request for it,
// and scales to two replicas once the gateway's measured rate asked for it
// for scale_up_delay (the in-server meter is not asked).
func TestGateways_statsWakeFromZeroAndDriveAutoscaling(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"gw.dstack.yml":    gatewaySpec,
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 0..2\n" +
			"scaling: {metric: rps, target: 5, scale_up_delay: 60, scale_down_delay: 120}\n",
	})
	be := f.fakeOn("aws")
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{})
	f.c.traffic = &fakeTraffic{} // never asked for a service on a gateway
	gw := f.runningGateway("gw", be)
	f.reconcileRun("web")
	run := f.run("web")
	if len(f.jobs(run.ID)) != 0 || serviceOf(t, lastConfig(t, gw), "web").MinReplicas != 0 {
		t.Fatalf("%d jobs, want none at min 0", len(f.jobs(run.ID)))
	}

	// A request is held at the gateway: the service wakes.
	gw.SetStats(api.GatewayStats{Services: []api.GatewayServiceStats{{Project: store.DefaultProject, Run: "web", Waiting: 1, LastRequest: f.clock.Now()}}})
	f.reconcileGateway("gw")
	f.reconcileRun("web")
	if js := latestSubmissions(f.jobs(run.ID)); len(js) != 1 {
		t.Fatalf("%d jobs after a held request, want 1", len(js))
	}
	f.provision("web")
	f.stepJob("web", store.JobRunning)
	f.reconcileJobs("web")

	// 8 rps for a target of 5, past scale_up_delay: two replicas.
	f.clock.Advance(61 * time.Second)
	gw.SetStats(api.GatewayStats{Services: []api.GatewayServiceStats{{Project: store.DefaultProject, Run: "web",
		Frames: frames(f.clock.Now(), 60, 8), LastRequest: f.clock.Now()}}})
	f.reconcileGateway("gw")
	f.reconcileRun("web")
	if js := latestSubmissions(f.jobs(run.ID)); len(js) != 2 {
		t.Fatalf("%d replicas at 8 rps measured by the gateway, want 2", len(js))
	}
}

// TestGateways_refusedAtValidation: what a revision's services and
// gateways ask of each other and of the server is checked with the
// revision, at the field's position.
func TestGateways_refusedAtValidation(t *testing.T) {
	const svc = "type: service\nname: web\nimage: x\nport: 80\ncommands: [ok]\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"a gateway the revision does not declare", map[string]string{"s.dstack.yml": svc + "gateway: nope\n"},
			[]string{`s.dstack.yml:6:10: gateway: gateway "nope" is not declared`}},
		{"the default gateway when none is", map[string]string{"s.dstack.yml": svc + "gateway: true\n"},
			[]string{"s.dstack.yml:6:10: gateway: the service asks for the default gateway"}},
		{"a gateway without a domain", map[string]string{"s.dstack.yml": svc + "gateway: gw\n",
			"g.dstack.yml": "type: gateway\nname: gw\nbackend: aws\nregion: loop\n"},
			[]string{`s.dstack.yml:6:10: gateway: gateway "gw" has no domain`}},
		{"https on a gateway without a certificate", map[string]string{"s.dstack.yml": svc,
			"g.dstack.yml": "type: gateway\nname: gw\nbackend: aws\nregion: loop\ndomain: example.com\ndefault: true\ncertificate: null\n"},
			[]string{`s.dstack.yml:1:1: https: cannot serve the service over HTTPS on gateway "gw"`}},
		{"plain HTTP on a gateway without a certificate is fine", map[string]string{"s.dstack.yml": svc + "https: false\n",
			"g.dstack.yml": "type: gateway\nname: gw\nbackend: aws\nregion: loop\ndomain: example.com\ndefault: true\ncertificate: null\n"}, nil},
		{"a backend that is not configured", map[string]string{"g.dstack.yml": "type: gateway\nname: gw\nbackend: gcp\nregion: loop\ndomain: example.com\n"},
			[]string{`g.dstack.yml:3:10: backend: backend "gcp" is not configured on this server or cannot run gateways`}},
		{"two default gateways", map[string]string{
			"g.dstack.yml": "type: gateway\nname: ga\nbackend: aws\nregion: loop\ndomain: a.com\ndefault: true\n",
			"h.dstack.yml": "type: gateway\nname: gb\nbackend: aws\nregion: loop\ndomain: b.com\ndefault: true\n"},
			[]string{"h.dstack.yml:6:10: default: only one gateway can be the default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.withBackends(map[string]backends.Backend{"aws": f.fakeOn("aws")}, Config{})
			fsys := fstest.MapFS{}
			for n, c := range tc.files {
				fsys[n] = &fstest.MapFile{Data: []byte(c)}
			}
			_, err := f.c.load(f.ctx, fsys)
			var got []string
			if es, ok := err.(schema.Errors); ok {
				for _, e := range es {
					got = append(got, e.Error())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors = %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

// selfSigned returns a self-signed certificate for host and its key, PEM.
func selfSigned(t *testing.T, host string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
}

// TestGateways_unreachableGatewayKeepsServingAndAGoneOneFails: a running
// gateway the server cannot reach stays running (it serves its last
// configuration) with the reason shown; one whose instance the provider
// lost fails.
func TestGateways_unreachableGatewayKeepsServingAndAGoneOneFails(t *testing.T) {
	f := newFixture(t, map[string]string{"gw.dstack.yml": gatewaySpec})
	be := f.fakeOn("aws")
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{})
	f.runningGateway("gw", be)
	inst := f.gateway("gw").InstanceID
	be.SetUnreachable(inst, true)
	if _, err := f.c.reconcileGateway(f.ctx, f.gateway("gw").ID); backends.KindOf(err) != backends.KindWait {
		t.Fatalf("reconcile of an unreachable gateway: %v, want a wait", err)
	}
	if g := f.gateway("gw"); g.Status != store.GatewayRunning || !strings.Contains(g.StatusMessage, "unreachable") {
		t.Fatalf("gateway %s (%q), want running, unreachable", g.Status, g.StatusMessage)
	}
	be.SetUnreachable(inst, false)
	be.Lose(inst)
	f.c.dropConn(inst)
	f.reconcileGateway("gw")
	if g := f.gateway("gw"); g.Status != store.GatewayFailed || g.StatusMessage != "the gateway's instance is gone" {
		t.Fatalf("gateway %s (%q), want failed, instance gone", g.Status, g.StatusMessage)
	}
}

// TestGateways_stoppedGatewayIsStartedAgainAndReconfigured: a gateway
// process gone from a live instance is started again, and the restarted
// gateway (with no configuration) gets its configuration put again.
func TestGateways_stoppedGatewayIsStartedAgainAndReconfigured(t *testing.T) {
	f := newFixture(t, map[string]string{"gw.dstack.yml": gatewaySpec})
	be := f.fakeOn("aws")
	f.withBackends(map[string]backends.Backend{"aws": be}, Config{})
	gw := f.runningGateway("gw", be)
	g := f.gateway("gw")
	if err := be.StopGateway(f.ctx, gatewayInstance(&g)); err != nil {
		t.Fatal(err)
	}
	if !gw.Stopped() {
		t.Fatal("the stand-in gateway did not stop")
	}
	if _, err := f.c.reconcileGateway(f.ctx, g.ID); backends.KindOf(err) != backends.KindWait {
		t.Fatalf("reconcile of a stopped gateway: %v, want a wait", err)
	}
	again, ok := be.Gateway(g.InstanceID)
	if !ok || again == gw {
		t.Fatal("the gateway was not started again")
	}
	f.reconcileGateway("gw")
	if cfg, ok := again.Config(); !ok || cfg.Domain != "main.example.com" || cfg.Version != f.gateway("gw").ConfigVersion {
		t.Fatalf("restarted gateway serves %+v (%v), want its configuration again", cfg, ok)
	}
	if g := f.gateway("gw"); g.Status != store.GatewayRunning {
		t.Fatalf("gateway %s (%q), want running", g.Status, g.StatusMessage)
	}
}
