// Package aws is the AWS backend: EC2 instances launched with
// aws-sdk-go-v2's service/ec2 and taken over by the shared cloud-VM engine
// (backends/vm) exactly as SSH-fleet hosts. It implements vm.Provider (launch,
// observe, list, terminate), vm.VolumeProvider (EBS gp3 volumes) and
// vm.PlacementProvider (cluster placement groups).
//
// The configuration is dstack's AWS backend entry
// (src/dstack/_internal/core/backends/aws/models.py: creds, regions,
// vpc_name, vpc_ids, default_vpcs, public_ips, iam_instance_profile, tags,
// os_images) plus endpoint_url, the EC2 endpoint for the cloud simulator
// (e2e/cloudsim) and sovereign partitions. dstack's
// experimental_instance_types is refused.
//
// cmd/hoist imports it (one Registry line); nothing else should.
package aws
