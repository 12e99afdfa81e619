package aws

import (
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// open builds the backend through Factory, as hoist serve does, from the
// simulator's entry.
func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	b, err := Factory(e.config(t, nil), drivertest.Deps(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	env := startSim(t)
	recs := drivertest.Records(t)
	b := env.open(t, recs)
	if _, ok := b.(backends.VolumeBackend); !ok {
		t.Error("the aws backend is not a VolumeBackend")
	}
	if _, ok := b.(backends.PlacementBackend); !ok {
		t.Error("the aws backend is not a PlacementBackend")
	}
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		// Another server: a backend of its own over the same records.
		Peer: func(t *testing.T) backends.Backend { return env.open(t, recs) },
		// The simulator's spot interruption (POST /_sim/interrupt).
		Interrupt: func(t *testing.T, inst backends.Instance) {
			_, id, err := parseRef(inst.ProviderID)
			if err != nil {
				t.Fatal(err)
			}
			env.cloud.Interrupt(id)
		},
		// A volume made with the SDK alone, as a user would; registered
		// by its bare id, as dstack's volume_id.
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			p := env.newTestProvider(t, nil)
			_, zone, err := p.zoneOf(t.Context(), region)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.client(region).CreateVolume(t.Context(), &ec2.CreateVolumeInput{
				AvailabilityZone: awssdk.String(zone), Size: awssdk.Int32(int32(sizeGB)), VolumeType: types.VolumeTypeGp3,
			})
			if err != nil {
				t.Fatal(err)
			}
			return awssdk.ToString(out.VolumeId)
		},
	})
	st := env.cloud.Stats()
	t.Logf("EC2 calls: %v (failed on purpose: %v)", st.Calls["aws"], st.Failed["aws"])
}
