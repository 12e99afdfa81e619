// Package ec2 is the cloud simulator's AWS: it serves the EC2 Query API
// (POST / with Action=..., XML responses in the 2016-11-15 namespace, the
// EC2 error document) over a sim.Sim, enough of it for aws-sdk-go-v2's
// service/ec2 to work unmodified with only its BaseEndpoint overridden.
//
// It is test support for e2e/cloudsim and the backends/aws tests; nothing of
// the daemon imports it.
package ec2
