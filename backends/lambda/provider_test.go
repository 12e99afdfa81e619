package lambda

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	lambdasim "hoist/e2e/cloudsim/lambda"
	"hoist/e2e/cloudsim/sim"
)

// TestErrorMapping classifies the simulator's errors (Lambda's codes and
// statuses) as the engine and the reconciler read them.
func TestErrorMapping(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil, nil)
	ctx := t.Context()
	m, err := p.Launch(ctx, testLaunch("err-1", "inst-a"))
	if err != nil {
		t.Fatal(err)
	}
	bad := env.newTestProvider(t, nil, func(o map[string]any) {
		o["creds"] = map[string]any{"type": "api_key", "api_key": "secret_wrong"}
	})
	for _, tc := range []struct {
		name     string
		faults   *sim.Faults
		call     func() error
		kind     backends.Kind
		sentinel error
		code     string
	}{
		{"unknown instance", nil, func() error { _, err := p.Get(ctx, "0123"); return err },
			backends.KindTransient, backends.ErrNotFound, "global/object-does-not-exist"},
		{"invalid API key", nil, func() error { _, err := bad.Get(ctx, m.Ref); return err },
			backends.KindStalled, nil, "global/invalid-api-key"},
		{"invalid API key at launch", nil, func() error { _, err := bad.Launch(ctx, testLaunch("err-2", "inst-a")); return err },
			backends.KindStalled, nil, "global/invalid-api-key"},
		{"rate limited (429)", &sim.Faults{ErrorRate: 1}, func() error { _, err := p.Get(ctx, m.Ref); return err },
			backends.KindTransient, nil, "global/rate-limited"},
		{"rate-limited launch is not a capacity error", &sim.Faults{ErrorRate: 1}, func() error { _, err := p.Launch(ctx, testLaunch("err-3", "inst-a")); return err },
			backends.KindTransient, nil, "global/rate-limited"},
		{"insufficient capacity", &sim.Faults{Capacity: map[string]int{"cpu_4x_general": 0}}, func() error { _, err := p.Launch(ctx, testLaunch("err-4", "inst-a")); return err },
			backends.KindTransient, backends.ErrNoCapacity, "instance-operations/launch/insufficient-capacity"},
		{"unknown instance type", nil, func() error {
			req := testLaunch("err-5", "inst-a")
			req.Offer.Instance = "gpu_0x_nothing"
			_, err := p.Launch(ctx, req)
			return err
		}, backends.KindStalled, nil, "global/invalid-parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.faults != nil {
				env.cloud.Faults(*tc.faults)
				defer env.cloud.Faults(sim.Faults{})
			}
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			if k := backends.KindOf(err); k != tc.kind {
				t.Errorf("kind %v, want %v: %v", k, tc.kind, err)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("not %v: %v", tc.sentinel, err)
			}
			if tc.sentinel == nil && errors.Is(err, backends.ErrNoCapacity) {
				t.Errorf("a capacity error: %v", err)
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.Code != tc.code {
				t.Errorf("code %v, want %s: %v", ae, tc.code, err)
			}
		})
	}
	// A launch refused for capacity leaves no SSH key and no record.
	for _, r := range env.sim.List(lambdasim.Name, lambdasim.KindSSHKey) {
		if r.State != sim.StateDeleted && strings.Contains(r.Name, "err-4") {
			t.Errorf("SSH key %s left by a refused launch", r.Name)
		}
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatal(err)
	}
}

// TestListNeverForeign: List finds this installation's instances only, not
// another installation's (same names, another marker and records) nor
// instances launched outside hoist, and a terminated instance takes its
// SSH key and record with it.
func TestListNeverForeign(t *testing.T) {
	env := startSim(t)
	ctx := t.Context()
	ours := env.newTestProvider(t, nil, nil)
	theirs := env.newTestProvider(t, nil, nil)
	m, err := ours.Launch(ctx, testLaunch("same-id", "inst-ours"))
	if err != nil {
		t.Fatal(err)
	}
	fm, err := theirs.Launch(ctx, testLaunch("same-id", "inst-theirs"))
	if err != nil {
		t.Fatal(err)
	}
	// A user's own instance, with a name like hoist's and the installation's
	// marker, launched with a key of their own.
	userReq := testLaunch("user", "inst-ours")
	name := instanceName(userReq)
	if _, err := ours.api.addSSHKey(ctx, "users-key", testKey); err != nil {
		t.Fatal(err)
	}
	uid, err := ours.api.launch(ctx, launchRequest{RegionName: "us-east-1", InstanceTypeName: "cpu_4x_general",
		SSHKeyNames: []string{"users-key"}, Quantity: 1, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, tags := range []map[string]string{
		nil,
		{backends.TagInstallation: "inst-ours"},
		{backends.TagInstance: "same-id"},
	} {
		got, err := ours.List(ctx, tags)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Ref != m.Ref || got[0].Tags[backends.TagInstance] != "same-id" {
			t.Errorf("List(%v) = %+v, want only %s", tags, got, m.Ref)
		}
	}
	if got, _ := ours.List(ctx, map[string]string{backends.TagInstallation: "inst-theirs"}); len(got) != 0 {
		t.Errorf("List(their installation) = %+v, want nothing", got)
	}
	// Launch is idempotent on the name: the same instance again.
	again, err := ours.Launch(ctx, testLaunch("same-id", "inst-ours"))
	if err != nil || again.Ref != m.Ref {
		t.Errorf("second Launch = %s, %v; want %s", again.Ref, err, m.Ref)
	}
	// Deleting the user's instance through hoist (never done by the engine,
	// which deletes only what it lists) leaves their key alone.
	if err := ours.Delete(ctx, uid); err != nil {
		t.Fatal(err)
	}
	if err := ours.Delete(ctx, m.Ref); err != nil {
		t.Fatal(err)
	}
	if err := ours.Delete(ctx, m.Ref); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if got, _ := ours.List(ctx, nil); len(got) != 0 {
		t.Errorf("List after Delete = %+v", got)
	}
	keys, err := ours.api.sshKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	want := []string{instanceName(testLaunch("same-id", "inst-theirs")), "users-key"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("SSH keys left: %v, want %v", names, want)
	}
	if recs, _ := ours.records(ctx); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
	if err := theirs.Delete(ctx, fm.Ref); err != nil {
		t.Fatal(err)
	}

	// An instance terminated outside hoist: once its record is stale, List
	// deletes the record and the instance's SSH key.
	gm, err := ours.Launch(ctx, testLaunch("outside", "inst-ours"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.api.terminate(ctx, gm.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := ours.List(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if recs, _ := ours.records(ctx); len(recs) != 1 {
		t.Errorf("a fresh record went: %v", recs)
	}
	ours.now = func() time.Time { return time.Now().Add(staleAfter + time.Minute) }
	if _, err := ours.List(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if recs, _ := ours.records(ctx); len(recs) != 0 {
		t.Errorf("stale records left: %v", recs)
	}
	for _, k := range must(ours.api.sshKeys(ctx)) {
		if k.Name == instanceName(testLaunch("outside", "inst-ours")) {
			t.Errorf("SSH key %s of an instance terminated outside hoist left", k.Name)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLaunchKeyAndImage: the launch registers the instance's own key under
// its name and asks for os_images' family; the VM accepts that key.
func TestLaunchKeyAndImage(t *testing.T) {
	env := startSim(t)
	ctx := t.Context()
	p := env.newTestProvider(t, nil, nil)
	m, err := p.Launch(ctx, testLaunch("img-1", "inst"))
	if err != nil {
		t.Fatal(err)
	}
	m = waitRunning(t, p, m.Ref)
	r, ok := env.sim.Get(lambdasim.Name, m.Ref)
	if !ok {
		t.Fatal("no simulated instance")
	}
	if r.Image != lambdasim.ImageRoot || r.User != "root" || len(r.AuthorizedKeys) != 1 || r.AuthorizedKeys[0] != testKey {
		t.Errorf("instance image %q user %q keys %v", r.Image, r.User, r.AuthorizedKeys)
	}
	if m.Address == "" || m.Region != "us-east-1" || m.InstanceType != "cpu_4x_general" {
		t.Errorf("machine %+v", m)
	}
	// Without os_images: Lambda's default image, as ubuntu.
	def := env.newTestProvider(t, nil, func(o map[string]any) { delete(o, "os_images") })
	if def.cpuImage.User != "ubuntu" || def.cpuImage.Name != "" {
		t.Errorf("default image %+v", def.cpuImage)
	}
	m2, err := def.Launch(ctx, testLaunch("img-2", "inst"))
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := env.sim.Get(lambdasim.Name, m2.Ref); r.Image != "" || r.User != "ubuntu" {
		t.Errorf("default launch image %q user %q", r.Image, r.User)
	}
	gw := testLaunch("img-3", "inst")
	gw.Gateway = true
	if _, err := p.Launch(ctx, gw); !backends.IsStalled(err) {
		t.Errorf("a gateway launch: %v, want refused (stalled)", err)
	}
	for _, ref := range []string{m.Ref, m2.Ref} {
		if err := p.Delete(ctx, ref); err != nil {
			t.Error(err)
		}
	}
}

// TestOffersAvailability: catalog offers marked available where
// /instance-types has capacity, not_available (and last) elsewhere.
func TestOffersAvailability(t *testing.T) {
	env := startSim(t)
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"cpu_4x_general": 0}})
	b := env.open(t, drivertest.Records(t))
	all, err := b.Offers(t.Context(), offers.Query{})
	if err != nil || len(all) == 0 {
		t.Fatalf("Offers = %d, %v", len(all), err)
	}
	seenNA := false
	for _, o := range all {
		if o.Region != "us-east-1" && o.Region != "us-west-1" {
			t.Errorf("offer %s in %s, outside regions", o.Instance, o.Region)
		}
		switch {
		case o.Instance == "cpu_4x_general" && o.Availability != offers.AvailabilityNotAvailable:
			t.Errorf("offer %s %s: %s, want not_available", o.Instance, o.Region, o.Availability)
		case o.Instance != "cpu_4x_general" && o.Availability != offers.AvailabilityAvailable:
			t.Errorf("offer %s %s: %s, want available", o.Instance, o.Region, o.Availability)
		}
		if o.Availability == offers.AvailabilityNotAvailable {
			seenNA = true
		} else if seenNA {
			t.Errorf("available offer %s after a not_available one", o.Instance)
		}
	}
	if !seenNA {
		t.Error("no not_available offer")
	}
	// The limit applies after the reordering: the cheapest type has no
	// capacity, the one offer returned is an available one.
	one, err := b.Offers(t.Context(), offers.Query{Limit: 1})
	if err != nil || len(one) != 1 || one[0].Availability != offers.AvailabilityAvailable {
		t.Errorf("Offers(limit 1) = %+v, %v; want one available offer", one, err)
	}
}

// TestOptions: dstack's entry is accepted (creds' type defaults to
// api_key); what hoist cannot honour is refused with the field.
func TestOptions(t *testing.T) {
	env := startSim(t)
	if _, err := Factory(env.config(t, func(o map[string]any) {
		o["creds"] = map[string]any{"api_key": lambdasim.APIKey}
	}), drivertest.Deps(t, drivertest.Records(t))); err != nil {
		t.Errorf("creds without type: %v", err)
	}
	for _, tc := range []struct {
		edit func(map[string]any)
		want string
	}{
		{func(o map[string]any) { delete(o, "creds") }, "creds is required"},
		{func(o map[string]any) { o["creds"] = map[string]any{"type": "default"} }, "creds.type"},
		{func(o map[string]any) { o["creds"] = map[string]any{"type": "api_key"} }, "creds.api_key is required"},
		{func(o map[string]any) { o["vpc_name"] = "x" }, `unknown field "vpc_name"`},
		{func(o map[string]any) { o["regions"] = []string{"us east"} }, "regions"},
		{func(o map[string]any) { o["endpoint_url"] = "ftp://x" }, "endpoint_url"},
		{func(o map[string]any) {
			o["os_images"] = map[string]any{"cpu": map[string]any{"name": "x", "user": "ubuntu"}, "nvidia": map[string]any{"name": "y", "user": "root"}}
		}, "os_images"},
		{func(o map[string]any) {
			o["creds"] = map[string]any{"type": "api_key", "api_key": "secret_wrong"}
		}, "invalid-api-key"},
	} {
		_, err := Factory(env.config(t, tc.edit), drivertest.Deps(t, drivertest.Records(t)))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"lambda"`) {
			b, _ := json.Marshal(env.config(t, tc.edit).Options)
			t.Errorf("Factory(%s) = %v, want an error naming the backend and %q", b, err, tc.want)
		}
	}
}
