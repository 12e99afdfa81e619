package aws

import (
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/ec2"
)

// simVPC is the id of the simulator's named VPC (ec2.SimVPCName).
const simVPC = "vpc-0a11ce0000000001"

// TestNetwork_vpcNameAndIDs: vpc_name and vpc_ids launch into that VPC's
// subnet with the installation's security group of that VPC, still with a
// public address; default_vpcs: false keeps only the regions vpc_ids names.
func TestNetwork_vpcNameAndIDs(t *testing.T) {
	env := startSim(t)
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"vpc_name", func(o map[string]any) { o["vpc_name"] = ec2.SimVPCName }},
		{"vpc_ids", func(o map[string]any) {
			o["vpc_ids"] = map[string]string{"us-east-1": simVPC}
			o["default_vpcs"] = false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := env.newTestProvider(t, tc.edit)
			if tc.name == "vpc_ids" && strings.Join(p.regions, ",") != "us-east-1" {
				t.Errorf("regions = %v, want only us-east-1 (default_vpcs: false)", p.regions)
			}
			req := launchRequest("vpc-" + tc.name)
			req.Tags[backends.TagInstallation] = "inst-" + tc.name
			m, err := p.Launch(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			_, id, _ := parseRef(m.Ref)
			r, _ := env.sim.Get("aws", id)
			if r.Extra["vpc_id"] != simVPC || !strings.HasPrefix(r.Extra["subnet_id"], "subnet-01") || r.Zone != "us-east-1a" {
				t.Errorf("instance network = %v in %s, want a subnet of %s", r.Extra, r.Zone, simVPC)
			}
			sg, _ := env.sim.Get("aws", r.Extra["security_groups"])
			if sg.Extra["vpc_id"] != simVPC {
				t.Errorf("security group %+v is not in %s", sg, simVPC)
			}
			if run := waitState(t, p, m.Ref, vm.StateRunning); run.Address == "" {
				t.Errorf("no public address: %+v", run)
			}
		})
	}
	t.Run("unknown vpc_name", func(t *testing.T) {
		p := env.newTestProvider(t, func(o map[string]any) { o["vpc_name"] = "nope" })
		_, err := p.Launch(t.Context(), launchRequest("vpc-nope"))
		if !backends.IsStalled(err) || !strings.Contains(err.Error(), `no VPC named "nope"`) {
			t.Errorf("Launch = %v, want stalled: no VPC named nope", err)
		}
	})
}

// TestNetwork_privateIPs: public_ips: false launches without a public
// address and reaches the instance at its private one.
func TestNetwork_privateIPs(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, func(o map[string]any) { o["public_ips"] = false })
	m, err := p.Launch(t.Context(), launchRequest("priv-1"))
	if err != nil {
		t.Fatal(err)
	}
	if run := waitState(t, p, m.Ref, vm.StateRunning); run.Address == "" {
		t.Errorf("no private address: %+v", run)
	}
	public := env.newTestProvider(t, nil)
	if m2, err := public.Get(t.Context(), m.Ref); err != nil || m2.Address != "" {
		t.Errorf("public address of a public_ips: false instance = %q, %v; want none", m2.Address, err)
	}
}
