package ec2_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	cloudec2 "hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// onceClient is the SDK client without retries and with a per-attempt
// timeout, so that each call shows the fault it met.
func onceClient(c *testenv.CloudSim, timeout time.Duration) *ec2.Client {
	return ec2.New(ec2.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider(cloudec2.AccessKey, cloudec2.SecretKey, ""),
		BaseEndpoint:     awssdk.String(c.Endpoints["aws"]),
		RetryMaxAttempts: 1,
		HTTPClient:       awshttp.NewBuildableClient().WithTimeout(timeout),
	})
}

// TestFaults_kinds: every injected kind reaches the SDK as EC2 answers it:
// RequestLimitExceeded (503), InternalError (500) or Unavailable (503),
// InsufficientInstanceCapacity on RunInstances only, and a connection
// closed without an answer for timeouts and lost answers; the stats count
// them by kind.
func TestFaults_kinds(t *testing.T) {
	c := testenv.StartCloudSim(t, cloudec2.New())
	api := onceClient(c, 10*time.Second)
	ctx := t.Context()
	img := simImage(t, ctx, api)
	status := func(err error) int {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			return re.HTTPStatusCode()
		}
		return 0
	}
	cases := []struct {
		kind  sim.Fault
		codes map[string]int // error code → HTTP status
	}{
		{sim.FaultThrottle, map[string]int{"RequestLimitExceeded": http.StatusServiceUnavailable}},
		{sim.FaultTransient, map[string]int{"InternalError": http.StatusInternalServerError, "Unavailable": http.StatusServiceUnavailable}},
		{sim.FaultTimeout, map[string]int{"": 0}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{tc.kind: 1}, HoldMS: 200})
			for range 4 {
				_, err := api.DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
				want, ok := tc.codes[code(err)]
				if err == nil || !ok || status(err) != want {
					t.Fatalf("DescribeRegions = %v (code %q, status %d), want one of %v", err, code(err), status(err), tc.codes)
				}
			}
			if n := c.Stats().FailedByKind["aws"][string(tc.kind)]; n < 4 {
				t.Errorf("stats count %d %s faults, want >= 4", n, tc.kind)
			}
		})
	}

	// Capacity falls on creates only; the other calls are served.
	c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{sim.FaultCapacity: 1}})
	if _, err := api.DescribeRegions(ctx, &ec2.DescribeRegionsInput{}); err != nil {
		t.Errorf("DescribeRegions with capacity faults = %v, want served", err)
	}
	in := &ec2.RunInstancesInput{
		ImageId: awssdk.String(img), InstanceType: types.InstanceTypeT3Micro,
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String("tok-cap"),
	}
	if _, err := api.RunInstances(ctx, in); code(err) != "InsufficientInstanceCapacity" {
		t.Errorf("RunInstances with capacity faults = %v, want InsufficientInstanceCapacity", err)
	}

	// A lost answer: the instance is made, the client sees the connection
	// close; the same client token then returns that instance, not a
	// second one.
	c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{sim.FaultLost: 1}, HoldMS: 200})
	in.ClientToken = awssdk.String("tok-lost")
	if out, err := api.RunInstances(ctx, in); err == nil || code(err) != "" {
		t.Fatalf("RunInstances with its answer lost = %+v, %v; want a transport error", out, err)
	}
	made := tokenInstances(c, "tok-lost")
	if len(made) != 1 {
		t.Fatalf("%d instances for the lost RunInstances, want 1 (carried out)", len(made))
	}
	c.Faults(sim.Faults{})
	again, err := api.RunInstances(ctx, in)
	if err != nil || awssdk.ToString(again.Instances[0].InstanceId) != made[0] {
		t.Errorf("RunInstances retried with the same token = %+v, %v; want %s", again, err, made[0])
	}
	if n := len(tokenInstances(c, "tok-lost")); n != 1 {
		t.Errorf("%d instances after the retry, want 1", n)
	}

	// A client that times out before the hold ends gets its timeout.
	c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{sim.FaultTimeout: 1}, HoldMS: 60_000})
	start := time.Now()
	_, err = onceClient(c, 300*time.Millisecond).DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	if err == nil || time.Since(start) > 30*time.Second {
		t.Errorf("DescribeRegions held past the client's timeout = %v after %s", err, time.Since(start))
	}
	c.Faults(sim.Faults{})
}

// tokenInstances returns the ids of the simulator's instances made with a
// client token.
func tokenInstances(c *testenv.CloudSim, token string) []string {
	var out []string
	for _, r := range c.Sim().List("aws", sim.KindInstance) {
		if r.Extra["client_token"] == token {
			out = append(out, r.ID)
		}
	}
	return out
}
