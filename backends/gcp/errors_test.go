package gcp

import (
	"errors"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
)

// TestErrorMapping classifies errors the simulator produces through the
// official client, as the engine and the reconciler read them.
func TestErrorMapping(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	other := startSim(t)
	ctx := t.Context()

	// A policy and a disk in use, for the in-use cases.
	pg, err := p.CreatePlacementGroup(ctx, "hoist-pg-errors", "us-central1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := launchRequest("err-1")
	req.PlacementGroup = pg
	m, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.CreateVolume(ctx, vm.VolumeRequest{ID: "v-1", Name: "hoist-v-errors", Region: "us-central1-a", SizeGB: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, p, m.Ref)
	if _, err := p.AttachVolume(ctx, d.Ref, m.Ref); err != nil {
		t.Fatal(err)
	}

	type want struct {
		kind     backends.Kind
		sentinel error
		text     string
	}
	for _, tc := range []struct {
		name   string
		faults *sim.Faults
		call   func() error
		want   want
	}{
		{"unknown instance", nil, func() error { _, err := p.Get(ctx, "us-central1-a/nothing"); return err },
			want{backends.KindTransient, backends.ErrNotFound, "was not found"}},
		{"throttled get (429 rateLimitExceeded or 503 backendError)", &sim.Faults{ErrorRate: 1}, func() error { _, err := p.Get(ctx, m.Ref); return err },
			want{backends.KindTransient, nil, ""}},
		{"throttled get, the other of the two", &sim.Faults{ErrorRate: 1}, func() error { _, err := p.Get(ctx, m.Ref); return err },
			want{backends.KindTransient, nil, ""}},
		{"throttled insert is not a capacity error", &sim.Faults{ErrorRate: 1}, func() error { _, err := p.Launch(ctx, launchRequest("err-2")); return err },
			want{backends.KindTransient, nil, ""}},
		{"stockout in every zone", &sim.Faults{Capacity: map[string]int{"e2-standard-2": 0}}, func() error { _, err := p.Launch(ctx, launchRequest("err-3")); return err },
			want{backends.KindTransient, backends.ErrNoCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED"}},
		{"invalid name", nil, func() error {
			r := launchRequest("err-4")
			r.Name = "Not_A_Name"
			_, err := p.Launch(ctx, r)
			return err
		}, want{backends.KindStalled, nil, "Invalid value for field 'resource.name'"}},
		{"policy in use", nil, func() error { return p.DeletePlacementGroup(ctx, pg) },
			want{backends.KindWait, backends.ErrNotYetTerminated, "is already being used by"}},
		{"disk in use", nil, func() error { return p.DeleteVolume(ctx, d.Ref) },
			want{backends.KindWait, backends.ErrNotYetTerminated, "is already being used by"}},
		{"disk attached elsewhere", nil, func() error {
			m2, err := p.Launch(ctx, launchRequest("err-5"))
			if err != nil {
				return err
			}
			_, err = p.AttachVolume(ctx, d.Ref, m2.Ref)
			return err
		}, want{backends.KindWait, backends.ErrNotYetTerminated, "is already being used by"}},
		{"unknown disk", nil, func() error { _, err := p.GetVolume(ctx, "us-central1-a/nothing"); return err },
			want{backends.KindTransient, backends.ErrNotFound, ""}},
		{"project of someone else", nil, func() error {
			var o Options
			if err := env.config(t, func(o map[string]any) { o["project_id"] = "not-mine" }).Decode(&o); err != nil {
				return err
			}
			q, err := newProvider(ctx, "gcp", o, backends.Deps{})
			if err != nil {
				return err
			}
			defer q.Close()
			_, err = q.Get(ctx, m.Ref)
			return err
		}, want{backends.KindStalled, nil, "permission"}},
		{"key the simulator did not issue", nil, func() error {
			return env.checkWithCreds(t, other)
		}, want{backends.KindStalled, nil, "invalid_grant"}},
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
			if k := backends.KindOf(err); k != tc.want.kind {
				t.Errorf("kind %s, want %s: %v", k, tc.want.kind, err)
			}
			if tc.want.sentinel != nil && !errors.Is(err, tc.want.sentinel) {
				t.Errorf("not %v: %v", tc.want.sentinel, err)
			}
			if tc.want.sentinel == nil && errors.Is(err, backends.ErrNoCapacity) {
				t.Errorf("a capacity error: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want.text) {
				t.Errorf("error %q lacks %q", err, tc.want.text)
			}
		})
	}
}
