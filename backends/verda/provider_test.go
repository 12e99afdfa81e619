package verda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
	simverda "hoist/e2e/cloudsim/verda"
)

// testKey is an authorized_keys line for launches that are never logged
// into.
const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG8u8ZrR5UjS3FQmQbQv0G0nGm0yQ1Qm9mC8Yf3c3l8P hoist"

func launchReq(id, instanceType, region string, spot bool) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID: id, Name: "hoist-" + id, User: "root", PublicKey: testKey,
		Offer: offers.Offer{Instance: instanceType, Region: region, Spot: spot},
		Tags:  map[string]string{backends.TagInstallation: "inst-1", backends.TagProject: "p", backends.TagResource: "r"},
	}
}

func TestProvider_launchIdempotentAndCleansUp(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	m1, err := p.Launch(ctx, launchReq("i1", "CPU.4V.16G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := p.Launch(ctx, launchReq("i1", "CPU.4V.16G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	if m1.Ref != m2.Ref {
		t.Fatalf("second launch of i1 = %s, want the first's %s", m2.Ref, m1.Ref)
	}
	if n := len(liveOf(env, "instance")); n != 1 {
		t.Fatalf("%d instances, want 1", n)
	}
	r, _ := env.sim.Get(simverda.Name, m1.Ref)
	if r.Extra["hostname"] != "hoist-i1" || !strings.HasPrefix(r.Extra["description"], "hoist ") || r.SizeGB != defaultDiskGB || r.User != "root" {
		t.Errorf("instance = hostname %q description %q disk %d user %q", r.Extra["hostname"], r.Extra["description"], r.SizeGB, r.User)
	}
	env.cloud.WaitRunning(simverda.Name, m1.Ref, 30e9)
	if err := p.Delete(ctx, m1.Ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, m1.Ref); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := p.Get(ctx, m1.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get after delete = %v, want ErrNotFound", err)
	}
	for _, kind := range []string{"instance", "ssh_key", "script"} {
		if left := liveOf(env, kind); len(left) > 0 {
			t.Errorf("%d %s left after delete", len(left), kind)
		}
	}
}

// liveOf returns the simulator's resources of kind not deleted.
func liveOf(env *simEnv, kind string) []sim.Resource {
	var out []sim.Resource
	for _, r := range env.sim.List(simverda.Name, kind) {
		if r.Extra["deleted"] != "true" {
			out = append(out, r)
		}
	}
	return out
}

func TestProvider_listNeverForeign(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	ours, err := p.Launch(ctx, launchReq("mine", "CPU.4V.16G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	other := launchReq("theirs", "CPU.4V.16G", "FIN-01", false)
	other.Tags[backends.TagInstallation] = "inst-2"
	if _, err := p.Launch(ctx, other); err != nil {
		t.Fatal(err)
	}
	// An instance a user made in the console: no hoist description, even
	// one that looks like tags.
	for i, desc := range []string{"", "my training box", "hoist.installation=inst-1&hoist.instance=x"} {
		var key, id string
		if _, err := p.api.do(ctx, "POST", "/ssh-keys", map[string]string{"name": "user.key", "key": testKey}, &key); err != nil {
			t.Fatal(err)
		}
		body := createInstance{InstanceType: "CPU.4V.16G", Image: imageDefault, SSHKeyIDs: []string{key},
			Hostname: "user-box-" + string(rune('a'+i)), Description: desc, LocationCode: "FIN-01", Pricing: "FIXED_PRICE"}
		if _, err := p.api.do(ctx, "POST", "/instances", body, &id); err != nil {
			t.Fatal(err)
		}
	}
	all, err := p.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Errorf("List(no tags) = %d instances, want hoist's 2: %+v", len(all), all)
	}
	mine, err := p.List(ctx, map[string]string{backends.TagInstallation: "inst-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 1 || mine[0].Ref != ours.Ref || mine[0].Tags[backends.TagInstance] != "mine" || mine[0].Tags[backends.TagProject] != "p" {
		t.Errorf("List(installation inst-1) = %+v, want only %s with its tags", mine, ours.Ref)
	}
	// Another region configured: nothing of FIN-01.
	p2 := env.newTestProvider(t, func(o map[string]any) { o["regions"] = []string{"ICE-01"} })
	if got, err := p2.List(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("List in ICE-01 = %+v, %v; want none", got, err)
	}
}

func TestProvider_errors(t *testing.T) {
	env := startSim(t)
	ctx := t.Context()

	t.Run("invalid credentials", func(t *testing.T) {
		p := env.newTestProvider(t, func(o map[string]any) {
			o["creds"] = map[string]any{"type": "api_key", "client_id": simverda.ClientID, "client_secret": "wrong"}
		})
		err := p.check(ctx)
		if !backends.IsStalled(err) || !strings.Contains(err.Error(), "unauthorized_request") {
			t.Errorf("check with a wrong secret = %v (kind %v), want stalled unauthorized_request", err, backends.KindOf(err))
		}
		_, err = Factory(env.config(t, func(o map[string]any) {
			o["creds"] = map[string]any{"type": "api_key", "client_id": "nobody", "client_secret": "x"}
		}), drivertest.Deps(t, drivertest.Records(t)))
		if err == nil || !strings.Contains(err.Error(), `backend "verda"`) {
			t.Errorf("Factory with bad credentials = %v, want an error naming the backend", err)
		}
	})

	t.Run("no capacity", func(t *testing.T) {
		p := env.newTestProvider(t, nil)
		env.cloud.Faults(sim.Faults{Capacity: map[string]int{"1H100.80S.30V": 0}})
		defer env.cloud.Faults(sim.Faults{})
		_, err := p.Launch(ctx, launchReq("cap", "1H100.80S.30V", "FIN-01", false))
		if !errors.Is(err, backends.ErrNoCapacity) {
			t.Fatalf("Launch out of capacity = %v, want ErrNoCapacity", err)
		}
		for _, kind := range []string{"instance", "ssh_key", "script"} {
			if left := liveOf(env, kind); len(left) > 0 {
				t.Errorf("%d %s left after a failed launch", len(left), kind)
			}
		}
		// An instance type Verda does not know in the location is no
		// capacity too (dstack's way): the next offer is tried.
		if _, err := p.Launch(ctx, launchReq("bad", "NOPE.1V", "FIN-01", false)); !errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("Launch of an unknown type = %v, want ErrNoCapacity", err)
		}
	})

	t.Run("rate limit", func(t *testing.T) {
		p := env.newTestProvider(t, nil)
		if err := p.check(ctx); err != nil {
			t.Fatal(err)
		}
		env.cloud.Faults(sim.Faults{ErrorRate: 1})
		defer env.cloud.Faults(sim.Faults{})
		_, err := p.List(ctx, nil)
		if backends.KindOf(err) != backends.KindTransient || !strings.Contains(err.Error(), "429") {
			t.Errorf("List rate limited = %v (kind %v), want transient 429", err, backends.KindOf(err))
		}
		_, err = p.Launch(ctx, launchReq("rl", "CPU.4V.16G", "FIN-01", false))
		if backends.KindOf(err) != backends.KindTransient || errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("Launch rate limited = %v (kind %v), want transient, not no capacity", err, backends.KindOf(err))
		}
	})

	t.Run("unknown instance", func(t *testing.T) {
		p := env.newTestProvider(t, nil)
		if _, err := p.Get(ctx, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("Get of an unknown id = %v, want ErrNotFound", err)
		}
		if err := p.Delete(ctx, "00000000-0000-4000-8000-000000000000"); err != nil {
			t.Errorf("Delete of an unknown id = %v, want nil", err)
		}
	})

	t.Run("expired token", func(t *testing.T) {
		p := env.newTestProvider(t, nil)
		if err := p.check(ctx); err != nil {
			t.Fatal(err)
		}
		// Every token the simulator handed out is revoked: the client
		// asks for a new one on the 401.
		env.expire(t)
		if _, err := p.List(ctx, nil); err != nil {
			t.Errorf("List after the token expired = %v", err)
		}
	})
}

func TestOptions_refused(t *testing.T) {
	env := startSim(t)
	for name, edit := range map[string]func(map[string]any){
		"unknown field": func(o map[string]any) { o["vpc_name"] = "x" },
		"creds type":    func(o map[string]any) { o["creds"] = map[string]any{"type": "access_key"} },
		"no secret":     func(o map[string]any) { o["creds"] = map[string]any{"type": "api_key", "client_id": "x"} },
		"endpoint":      func(o map[string]any) { o["endpoint_url"] = "ftp://x" },
	} {
		_, err := Factory(env.config(t, edit), drivertest.Deps(t, drivertest.Records(t)))
		if err == nil {
			t.Errorf("%s: Factory accepted it", name)
		}
	}
}

func TestOffers_liveAvailability(t *testing.T) {
	env := startSim(t)
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"CPU.4V.16G": 0}})
	b := env.open(t, drivertest.Records(t))
	all, err := b.Offers(context.Background(), offers.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no offers")
	}
	for i, o := range all {
		if o.Instance == "CPU.4V.16G" {
			t.Errorf("offer %s in %s, which the availability leaves out", o.Instance, o.Region)
		}
		if o.Backend != "verda" || o.Region == "ICE-01" {
			t.Errorf("offer %+v: backend or region outside the entry", o)
		}
		if i > 0 && o.Price < all[i-1].Price {
			t.Errorf("offers not cheapest first at %d: %v after %v", i, o.Price, all[i-1].Price)
		}
	}
	spot, err := b.Offers(context.Background(), offers.Query{SpotPolicy: offers.SpotPolicySpot})
	if err != nil || len(spot) == 0 {
		t.Fatalf("Offers(spot) = %d offers, %v", len(spot), err)
	}
	for _, o := range spot {
		if !o.Spot || o.Instance == "CPU.4V.16G" {
			t.Errorf("Offers(spot): %s in %s spot=%v", o.Instance, o.Region, o.Spot)
		}
	}
	lim, err := b.Offers(context.Background(), offers.Query{Limit: 1})
	if err != nil || len(lim) != 1 || lim[0].Instance != all[0].Instance || lim[0].Region != all[0].Region || lim[0].Spot != all[0].Spot {
		t.Errorf("Offers(limit 1) = %+v, %v; want the cheapest", lim, err)
	}
}

func TestImage(t *testing.T) {
	for gpu, want := range map[string]string{"V100": imageOlderGPUs, "A6000": imageOlderGPUs, "H100": imageDefault, "": imageDefault} {
		if got := image(offers.Offer{GPUName: gpu}); got != want {
			t.Errorf("image(%q) = %s, want %s", gpu, got, want)
		}
	}
}

func TestProvider_deleteWhileProvisioningWaits(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{Stuck: map[string]int{"CPU.8V.32G": 1}})
	m, err := p.Launch(t.Context(), launchReq("slow", "CPU.8V.32G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(t.Context(), m.Ref); err != nil || got.State != vm.StatePending {
		t.Fatalf("Get = %+v, %v; want pending", got, err)
	}
	err = p.Delete(t.Context(), m.Ref)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("Delete while provisioning = %v (kind %v), want Wait with ErrNotYetTerminated", err, backends.KindOf(err))
	}
}
