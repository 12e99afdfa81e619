package aws

import (
	"context"
	"errors"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// regionOnlyType returns an instance type the catalog sells in us-east-1
// but not in us-west-2: EC2 answers Unsupported for it there.
func regionOnlyType(t *testing.T) string {
	t.Helper()
	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	west := map[string]bool{}
	for _, o := range cat.Query(offers.Query{Backends: []string{"aws"}, Regions: []string{"us-west-2"}}) {
		west[o.Instance] = true
	}
	for _, o := range cat.Query(offers.Query{Backends: []string{"aws"}, Regions: []string{"us-east-1"}}) {
		if !west[o.Instance] {
			return o.Instance
		}
	}
	t.Fatal("no instance type sold in us-east-1 only")
	return ""
}

// TestErrors_fromSimulator maps the errors the simulated EC2 answers, as
// the SDK returns them, to hoist's kinds and sentinels.
func TestErrors_fromSimulator(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	eastOnly := regionOnlyType(t)
	inUse, err := p.CreatePlacementGroup(ctx, "busy", "us-east-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	busy := launchRequest("busy")
	busy.PlacementGroup = inUse
	if _, err := p.Launch(ctx, busy); err != nil {
		t.Fatal(err)
	}
	var o Options
	if err := env.config(t, func(o map[string]any) {
		o["creds"] = map[string]any{"type": "access_key", "access_key": "AKIAWRONGWRONGWRONG0", "secret_key": "nope"}
	}).Decode(&o); err != nil {
		t.Fatal(err)
	}
	badKey, err := newProvider(o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		call     func(context.Context) error
		code     string
		sentinel error
		kind     backends.Kind
	}{
		{"unsupported type in region", func(ctx context.Context) error {
			r := launchRequest("x1")
			r.Offer.Instance, r.Offer.Region = eastOnly, "us-west-2"
			_, err := p.Launch(ctx, r)
			return err
		}, "Unsupported", backends.ErrNoCapacity, backends.KindTransient},
		{"unknown instance type", func(ctx context.Context) error {
			r := launchRequest("x2")
			r.Offer.Instance = "z9.mega"
			_, err := p.Launch(ctx, r)
			return err
		}, "InvalidParameterValue", backends.ErrNoCapacity, backends.KindTransient},
		{"unknown placement group", func(ctx context.Context) error {
			r := launchRequest("x3")
			r.PlacementGroup = "us-east-1/nope"
			_, err := p.Launch(ctx, r)
			return err
		}, "InvalidPlacementGroup.Unknown", backends.ErrNotFound, backends.KindTransient},
		{"describe unknown instance", func(ctx context.Context) error {
			_, err := p.Get(ctx, "us-east-1/i-0123456789abcdef0")
			return err
		}, "InvalidInstanceID.NotFound", backends.ErrNotFound, backends.KindTransient},
		{"placement group in use", func(ctx context.Context) error {
			return p.DeletePlacementGroup(ctx, inUse)
		}, "InvalidPlacementGroup.InUse", backends.ErrNotYetTerminated, backends.KindWait},
		{"wrong access key", func(ctx context.Context) error {
			return badKey.check(ctx)
		}, "AuthFailure", nil, backends.KindStalled},
		{"wrong access key on launch", func(ctx context.Context) error {
			_, err := badKey.Launch(ctx, launchRequest("x4"))
			return err
		}, "AuthFailure", nil, backends.KindStalled},
		{"malformed volume id", func(ctx context.Context) error {
			_, err := p.GetVolume(ctx, "us-east-1/volume-1")
			return err
		}, "", backends.ErrNotFound, backends.KindTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(ctx)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.code != "" && code(err) != tt.code {
				t.Errorf("code = %q, want %q (%v)", code(err), tt.code, err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("%v does not wrap %v", err, tt.sentinel)
			}
			if got := backends.KindOf(err); got != tt.kind {
				t.Errorf("kind = %s, want %s (%v)", got, tt.kind, err)
			}
		})
	}
	// Deleting what is already gone is success.
	if err := p.Delete(ctx, "us-east-1/i-0123456789abcdef0"); err != nil {
		t.Errorf("Delete of an unknown instance = %v", err)
	}
	if err := p.DeleteVolume(ctx, "us-east-1/vol-0123456789abcdef0"); err != nil {
		t.Errorf("DeleteVolume of an unknown volume = %v", err)
	}
	if err := p.DetachVolume(ctx, "us-east-1/vol-0123456789abcdef0", "us-east-1/i-0123456789abcdef0", false); err != nil {
		t.Errorf("DetachVolume of an unknown volume = %v", err)
	}
	// An instance the simulator has not seen yet, just launched by this
	// process, is pending (EC2's eventual consistency), not gone.
	p.launched["us-east-1/i-0fffffffffffffff0"] = p.now()
	if m, err := p.Get(ctx, "us-east-1/i-0fffffffffffffff0"); err != nil || m.State != vm.StatePending {
		t.Errorf("Get of a just-launched unknown instance = %+v, %v", m, err)
	}
}

func TestFactory_refusesWhatItDoesNotHonour(t *testing.T) {
	env := startSim(t)
	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"vpc_name and vpc_ids", func(o map[string]any) {
			o["vpc_name"], o["vpc_ids"] = "main", map[string]string{"us-east-1": "vpc-1"}
		}, "vpc_name and vpc_ids"},
		{"default_vpcs false and no vpc", func(o map[string]any) { o["default_vpcs"] = false }, "default_vpcs: false, and vpc_ids names none"},
		{"unknown key", func(o map[string]any) { o["experimental_instance_types"] = []string{"x"} }, `unknown field "experimental_instance_types"`},
		{"no creds", func(o map[string]any) { delete(o, "creds") }, "creds is required"},
		{"creds type", func(o map[string]any) { o["creds"] = map[string]any{"type": "web_identity"} }, `creds: type "web_identity"`},
		{"image users differ", func(o map[string]any) {
			o["os_images"] = map[string]any{"cpu": map[string]any{"name": "hoist-sim-ubuntu-22.04", "owner": "123456789012", "user": "root"}}
		}, `user "root" and the nvidia image's user "ubuntu" differ`},
		{"wrong access key", func(o map[string]any) {
			o["creds"] = map[string]any{"type": "access_key", "access_key": "AKIAWRONG", "secret_key": "x"}
		}, "AuthFailure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Factory(env.config(t, tt.edit), backends.Deps{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Factory = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestFactory_defaultCredentials: creds {type: default} use the SDK's
// default chain (here the environment), and no regions means dstack's
// defaults.
func TestFactory_defaultCredentials(t *testing.T) {
	env := startSim(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAHOISTSIMULATOR01")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hoist-simulator-secret-access-key")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	p := env.newTestProvider(t, func(o map[string]any) {
		o["creds"] = map[string]any{"type": "default"}
		delete(o, "regions")
	})
	if len(p.regions) != len(defaultRegions) || p.regions[0] != "us-east-1" {
		t.Errorf("regions = %v, want dstack's defaults", p.regions)
	}
	if _, err := p.List(t.Context(), map[string]string{backends.TagInstallation: "none"}); err != nil {
		t.Errorf("List over the default regions = %v", err)
	}
}
