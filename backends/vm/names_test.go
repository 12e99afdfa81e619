package vm

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/offers"
)

func TestResourceName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	hexSuffix := regexp.MustCompile(`-[0-9a-f]{8}$`)
	cases := []struct {
		resource, id string
		max          int
		prefix       string
	}{
		{"gpu-pool-0", "inst-1", 63, "hoist-gpu-pool-0-"},
		{"My_Fleet/01", "inst-1", 63, "hoist-my-fleet-01-"},
		{"--", "inst-1", 63, "hoist-"},
		{"", "inst-1", 0, "hoist-"},
		{strings.Repeat("a", 100), "inst-1", 63, "hoist-" + strings.Repeat("a", 63-15) + "-"},
		{"abcd-efgh", "x", 20, "hoist-abcd-"}, // cut at a dash: the dash goes
	}
	for _, c := range cases {
		got := ResourceName(c.resource, c.id, c.max)
		max := c.max
		if max == 0 {
			max = DefaultMaxNameLen
		}
		if len(got) > max || !valid.MatchString(got) || !strings.HasPrefix(got, c.prefix) || !hexSuffix.MatchString(got) {
			t.Errorf("ResourceName(%q, %q, %d) = %q; want a valid name of at most %d starting %q", c.resource, c.id, c.max, got, max, c.prefix)
		}
		if again := ResourceName(c.resource, c.id, c.max); again != got {
			t.Errorf("ResourceName is not stable: %q then %q", got, again)
		}
	}
	if ResourceName("f", "a", 63) == ResourceName("f", "b", 63) {
		t.Error("different ids give the same name")
	}
	if got := ResourceName("fleet", "id", 10); len(got) > 10 {
		t.Errorf("ResourceName with max 10 = %q", got)
	}
}

func TestInRegions(t *testing.T) {
	cases := []struct {
		region  string
		regions []string
		want    bool
	}{
		{"us-east-1", nil, true},
		{"us-east-1", []string{"us-east-1"}, true},
		{"us-east-1a", []string{"us-east-1"}, true},
		{"us-central1-a", []string{"us-central1"}, true},
		{"US-Central1-B", []string{"us-central1"}, true},
		{"eastus2", []string{"eastus"}, false},
		{"us-east-1", []string{"us-east-2", "us-east-1"}, true},
		{"us-east-10", []string{"us-east-1"}, false},
		{"us-central1-ab", []string{"us-central1"}, false},
		{"us-west1-a", []string{"us-central1"}, false},
	}
	for _, c := range cases {
		if got := InRegions(c.region, c.regions); got != c.want {
			t.Errorf("InRegions(%q, %q) = %v, want %v", c.region, c.regions, got, c.want)
		}
	}
}

const testCSV = `instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,gpu_vendor,flags,cpu_arch,provider_data
n1-standard-4,us-central1-a,0.19,4,15,0,,,False,,,,x86,
n1-standard-4,us-central1-b,0.18,4,15,0,,,False,,,,x86,
n1-standard-4,us-central1-b,0.05,4,15,0,,,True,,,,x86,
t2a-standard-4,us-central1-a,0.01,4,16,0,,,False,,,,arm,
n1-standard-4,europe-west4-a,0.17,4,15,0,,,False,,,,x86,
n1-standard-8,us-central1-a,0.38,8,30,0,,,False,,,,x86,
a2-highgpu-1g,us-central1-a,3.67,12,85,1,A100,40,False,,nvidia,,x86,
`

func testCatalog(t *testing.T) *offers.Catalog {
	t.Helper()
	tab, err := offers.ReadCSV(strings.NewReader(testCSV), "gcp")
	if err != nil {
		t.Fatal(err)
	}
	other, err := offers.ReadCSV(strings.NewReader(strings.ReplaceAll(testCSV, "us-central1", "us-east-1")), "aws")
	if err != nil {
		t.Fatal(err)
	}
	return offers.New("2025-01-01", tab, other)
}

func TestCatalogOffers(t *testing.T) {
	c := testCatalog(t)
	got := catalogOffers(c, "gcp", []string{"us-central1"}, offers.Query{CPU: offers.AtLeast(4)})
	var keys []string
	for _, o := range got {
		keys = append(keys, o.Backend+"/"+o.Instance+"/"+o.Region)
	}
	want := "gcp/n1-standard-4/us-central1-b gcp/n1-standard-4/us-central1-a gcp/n1-standard-8/us-central1-a gcp/a2-highgpu-1g/us-central1-a"
	if strings.Join(keys, " ") != want {
		t.Errorf("offers = %v, want %v (on demand, x86, narrowed to us-central1, cheapest first)", keys, want)
	}
	spot := catalogOffers(c, "gcp", []string{"us-central1"}, offers.Query{SpotPolicy: offers.SpotPolicyAuto, Limit: 1})
	if len(spot) != 1 || !spot[0].Spot || spot[0].Price != 0.05 {
		t.Errorf("auto, limit 1 = %+v, want the spot row", spot)
	}
	asked := catalogOffers(c, "gcp", nil, offers.Query{Regions: []string{"europe-west4"}})
	if len(asked) != 1 || asked[0].Region != "europe-west4-a" {
		t.Errorf("query regions europe-west4 = %+v, want the europe-west4-a row", asked)
	}
	if got := catalogOffers(nil, "gcp", nil, offers.Query{}); got != nil {
		t.Errorf("no catalog = %v", got)
	}
}

// TestOffersNameTheBackend checks that the engine's offers carry the
// backend entry's name, not the catalog's type, and that a server without a
// catalog has no offers.
func TestOffersNameTheBackend(t *testing.T) {
	c := testCatalog(t)
	b := &Backend{cfg: Config{Name: "gcp-prod", Type: "gcp", Regions: []string{"us-central1"}, Deps: backends.Deps{Catalog: func() *offers.Catalog { return c }}}}
	got, err := b.Offers(context.Background(), offers.Query{})
	if err != nil || len(got) == 0 {
		t.Fatalf("Offers = %v, %v", got, err)
	}
	for _, o := range got {
		if o.Backend != "gcp-prod" {
			t.Errorf("offer %+v: backend %q, want gcp-prod", o, o.Backend)
		}
	}
	for _, q := range []offers.Query{{Backends: []string{"GCP"}}, {Backends: []string{"gcp-prod", "aws"}}} {
		if got, err := b.Offers(context.Background(), q); err != nil || len(got) == 0 {
			t.Errorf("Offers(backends %v) = %v, %v; want the offers", q.Backends, got, err)
		}
	}
	if got, err := b.Offers(context.Background(), offers.Query{Backends: []string{"aws"}}); err != nil || len(got) != 0 {
		t.Errorf("Offers(backends aws) = %v, %v; want none", got, err)
	}
	b.cfg.Deps.Catalog = nil
	if got, err := b.Offers(context.Background(), offers.Query{}); err != nil || len(got) != 0 {
		t.Errorf("without a catalog: %v, %v", got, err)
	}
}

func TestCloudConfig(t *testing.T) {
	got := cloudConfig([]string{"ssh-ed25519 AAAA hoist-x", "", "bad\nkey"})
	want := "#cloud-config\nssh_authorized_keys:\n  - \"ssh-ed25519 AAAA hoist-x\"\n"
	if got != want {
		t.Errorf("cloudConfig = %q, want %q", got, want)
	}
}

func TestNewKey(t *testing.T) {
	priv, pub, err := newKey("hoist-i1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(priv), "-----BEGIN OPENSSH PRIVATE KEY-----") || !strings.HasPrefix(pub, "ssh-ed25519 ") || !strings.HasSuffix(pub, " hoist-i1") {
		t.Errorf("newKey = %q, %q", priv, pub)
	}
}
