package vultr_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vultr/govultr/v3"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/cloudsim/vultr"
	"hoist/e2e/testenv"
)

// bearer adds the API key to every request, as Vultr's docs show.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func client(t *testing.T, c *testenv.CloudSim, key string) *govultr.Client {
	t.Helper()
	vc := govultr.NewClient(&http.Client{Transport: bearer(key)})
	if err := vc.SetBaseURL(c.Endpoints[vultr.Name]); err != nil {
		t.Fatal(err)
	}
	vc.SetRetryLimit(0)
	return vc
}

// TestInstances creates a tagged instance in a VPC through govultr, finds it
// by tag across pages, sees it boot with its VPC address, deletes it and
// gets 404 from then on.
func TestInstances(t *testing.T) {
	c := testenv.StartCloudSim(t, vultr.New())
	vc := client(t, c, vultr.APIKey)
	ctx := t.Context()

	vpc, _, err := vc.VPC.Create(ctx, &govultr.VPCReq{Region: "ewr", Description: "hoist-vpc-ewr"})
	if err != nil {
		t.Fatal(err)
	}
	ud := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nssh_authorized_keys:\n- ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqf3mAbP8wmfIgq0G1DNi1XNpAG8LEWxD0n7RfS8Ukm test\n"))
	var ids []string
	for _, tag := range []string{"hoist.instance=a", "foreign"} {
		in, _, err := vc.Instance.Create(ctx, &govultr.InstanceCreateReq{Region: "ewr", Plan: "vc2-1c-2gb", Label: "l-" + tag,
			ImageID: "docker", UserData: ud, Tags: []string{"hoist.installation=x", tag}, AttachVPC: []string{vpc.ID}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_ = vc.Instance.Delete(context.Background(), id)
		}
	})
	got, meta, _, err := vc.Instance.List(ctx, &govultr.ListOptions{Tag: "hoist.installation=x", PerPage: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || meta.Links == nil || meta.Links.Next == "" || meta.Total != 2 {
		t.Fatalf("first page: %d instances, meta %+v", len(got), meta)
	}
	more, meta, _, err := vc.Instance.List(ctx, &govultr.ListOptions{Tag: "hoist.installation=x", PerPage: 1, Cursor: meta.Links.Next})
	if err != nil || len(more) != 1 || meta.Links.Next != "" || more[0].ID == got[0].ID {
		t.Fatalf("second page: %v %+v %v", more, meta, err)
	}
	mine, _, _, err := vc.Instance.List(ctx, &govultr.ListOptions{Tag: "hoist.instance=a"})
	if err != nil || len(mine) != 1 || mine[0].ID != ids[0] {
		t.Fatalf("by tag: %v %v", mine, err)
	}

	c.WaitRunning(vultr.Name, ids[0], time.Minute)
	in, _, err := vc.Instance.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != "active" || in.MainIP == "" || in.InternalIP != in.MainIP || in.Label != "l-hoist.instance=a" {
		t.Fatalf("instance %+v", in)
	}
	if err := vc.Instance.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	_, _, err = vc.Instance.Get(ctx, ids[0])
	if err == nil || !strings.Contains(err.Error(), "Invalid instance-id") {
		t.Fatalf("get after delete: %v", err)
	}
	if err := vc.Instance.Delete(ctx, ids[0]); err == nil {
		t.Fatal("second delete succeeded, want 404")
	}
	vpcs, _, _, err := vc.VPC.List(ctx, &govultr.ListOptions{PerPage: 500})
	if err != nil || len(vpcs) != 1 || vpcs[0].V4Subnet == "" || vpcs[0].Description != "hoist-vpc-ewr" {
		t.Fatalf("vpcs %+v %v", vpcs, err)
	}
}

// TestErrors checks the error answers: a bad key, a sold-out plan, a
// throttled call.
func TestErrors(t *testing.T) {
	c := testenv.StartCloudSim(t, vultr.New())
	ctx := t.Context()
	status := func(key string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Endpoints[vultr.Name]+"/v2/instances", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := status("wrong"); s != http.StatusUnauthorized {
		t.Errorf("bad key: %d", s)
	}
	vc := client(t, c, vultr.APIKey)
	c.Faults(sim.Faults{Capacity: map[string]int{"vc2-1c-2gb": 0}})
	_, _, err := vc.Instance.Create(ctx, &govultr.InstanceCreateReq{Region: "ewr", Plan: "vc2-1c-2gb", ImageID: "docker"})
	if err == nil || !strings.Contains(err.Error(), "out of stock") {
		t.Errorf("sold out: %v", err)
	}
	avail, _, err := vc.Region.Availability(ctx, "ewr", "all")
	if err != nil || slices.Contains(avail.AvailablePlans, "vc2-1c-2gb") || !slices.Contains(avail.AvailablePlans, "vc2-2c-4gb") {
		t.Errorf("availability in ewr with vc2-1c-2gb sold out: %+v %v", avail, err)
	}
	c.Faults(sim.Faults{ErrorRate: 1})
	if s := status(vultr.APIKey); s != http.StatusTooManyRequests {
		t.Errorf("throttled: %d", s)
	}
	c.Faults(sim.Faults{})
	plans, _, _, err := vc.Plan.List(ctx, "", nil)
	if err != nil || len(plans) != len(vultr.Plans) {
		t.Errorf("plans: %d %v", len(plans), err)
	}
	metal, _, _, err := vc.Plan.ListBareMetal(ctx, nil)
	if err != nil || len(metal) != len(vultr.MetalPlans) {
		t.Errorf("metal plans: %d %v", len(metal), err)
	}
}
