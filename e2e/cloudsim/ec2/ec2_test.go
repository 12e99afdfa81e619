package ec2_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"golang.org/x/crypto/ssh"

	cloudec2 "hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// client returns an unmodified SDK client for the simulator's EC2, only
// its endpoint overridden.
func client(c *testenv.CloudSim, accessKey string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, cloudec2.SecretKey, ""),
		BaseEndpoint: awssdk.String(c.Endpoints["aws"]),
	})
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func simImage(t *testing.T, ctx context.Context, c *ec2.Client) string {
	t.Helper()
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Owners:  []string{cloudec2.Account},
		Filters: []types.Filter{{Name: awssdk.String("name"), Values: []string{cloudec2.SimCPUImage}}},
	})
	if err != nil || len(out.Images) != 1 {
		t.Fatalf("DescribeImages = %+v, %v", out, err)
	}
	return awssdk.ToString(out.Images[0].ImageId)
}

// TestKeyPairLoginAndConsole: a VM launched with an imported key pair lets
// that key in as the image's user, and its console output shows the host
// key sshd presents.
func TestKeyPairLoginAndConsole(t *testing.T) {
	c := testenv.StartCloudSim(t, cloudec2.New())
	ctx := t.Context()
	api := client(c, cloudec2.AccessKey)
	signer, pub := testenv.NewAuthorizedKey(t)
	if _, err := api.ImportKeyPair(ctx, &ec2.ImportKeyPairInput{KeyName: awssdk.String("k1"), PublicKeyMaterial: []byte(pub)}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ImportKeyPair(ctx, &ec2.ImportKeyPairInput{KeyName: awssdk.String("k1"), PublicKeyMaterial: []byte(pub)}); code(err) != "InvalidKeyPair.Duplicate" {
		t.Errorf("second ImportKeyPair = %v", err)
	}
	run, err := api.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: awssdk.String(simImage(t, ctx, api)), InstanceType: types.InstanceTypeT3Micro,
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), KeyName: awssdk.String("k1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := awssdk.ToString(run.Instances[0].InstanceId)
	if run.Instances[0].State.Name != types.InstanceStateNamePending {
		t.Errorf("RunInstances state = %s, want pending", run.Instances[0].State.Name)
	}
	r := c.WaitRunning("aws", id, 10*time.Second)
	if r.Price <= 0 || r.User != "root" {
		t.Errorf("VM = %+v", r)
	}
	out, err := api.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: awssdk.String(id)})
	if err != nil {
		t.Fatal(err)
	}
	console, _ := base64.StdEncoding.DecodeString(awssdk.ToString(out.Output))
	_, block, _ := strings.Cut(string(console), "-----BEGIN SSH HOST KEY KEYS-----")
	block, _, _ = strings.Cut(block, "-----END SSH HOST KEY KEYS-----")
	f := strings.Fields(block)
	if len(f) < 2 {
		t.Fatalf("console output without host keys:\n%s", console)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(f[0] + " " + f[1]))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ssh.Dial("tcp", net.JoinHostPort(r.Address, "22"), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("ssh with the key pair's key, pinned to the console's host key: %v", err)
	}
	conn.Close()
}

// TestErrorsAndImages: the error document the SDK decodes, image lookup
// by name pattern, and a terminated instance's shutdown finished after a
// simulator restart.
func TestErrorsAndImages(t *testing.T) {
	c := testenv.StartCloudSim(t, cloudec2.New())
	ctx := t.Context()
	api := client(c, cloudec2.AccessKey)

	if _, err := client(c, "AKIAWRONG").DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); code(err) != "AuthFailure" {
		t.Errorf("wrong access key: %v", err)
	}
	if _, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}}); code(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("unknown instance: %v", err)
	}
	if _, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: awssdk.String("bogus"), Values: []string{"x"}}}}); code(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v", err)
	}
	imgs, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Owners:  []string{"898082745236"},
		Filters: []types.Filter{{Name: awssdk.String("name"), Values: []string{"Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"}}},
	})
	if err != nil || len(imgs.Images) != 2 {
		t.Errorf("DLAMI by pattern = %+v, %v; want both", imgs, err)
	}

	c.Faults(sim.Faults{Capacity: map[string]int{"t3.micro": 1}})
	in := &ec2.RunInstancesInput{
		ImageId: awssdk.String(simImage(t, ctx, api)), InstanceType: types.InstanceTypeT3Micro,
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), ClientToken: awssdk.String("tok-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: awssdk.String("owner"), Value: awssdk.String("test")}}}},
	}
	run, err := api.RunInstances(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id := awssdk.ToString(run.Instances[0].InstanceId)
	// The same token: the same instance, no capacity taken.
	if again, err := api.RunInstances(ctx, in); err != nil || awssdk.ToString(again.Instances[0].InstanceId) != id {
		t.Errorf("RunInstances with the same token = %v, %v", again, err)
	}
	in.ClientToken = awssdk.String("tok-2")
	if _, err := api.RunInstances(ctx, in); code(err) != "InsufficientInstanceCapacity" {
		t.Errorf("RunInstances beyond capacity = %v", err)
	}
	tagged, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: awssdk.String("tag:owner"), Values: []string{"test"}}}})
	if err != nil || len(tagged.Reservations) != 1 {
		t.Errorf("DescribeInstances by tag = %+v, %v", tagged, err)
	}

	c.WaitRunning("aws", id, 10*time.Second)
	if _, err := api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	// A restart loses the timer that ends the shutdown; the next look ends it.
	c.Restart()
	time.Sleep(600 * time.Millisecond)
	out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if st := out.Reservations[0].Instances[0].State.Name; st != types.InstanceStateNameTerminated {
		t.Errorf("state after terminate and restart = %s, want terminated", st)
	}
	if r, _ := c.Sim().Get("aws", id); r.State != sim.StateTerminated || r.TerminatedAt == nil {
		t.Errorf("sim resource = %+v", r)
	}
}
