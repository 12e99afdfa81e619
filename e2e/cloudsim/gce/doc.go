// Package gce simulates Google Compute Engine for the cloud simulator
// (e2e/cloudsim): enough of the Compute REST API v1 (instances, disks,
// resource policies, firewalls, zone, region and global operations, regions
// and zones) and of Google's OAuth2 token endpoint (the service-account
// JWT-bearer grant) for Google's official client,
// cloud.google.com/go/compute/apiv1, to work unmodified against it with only
// option.WithEndpoint overridden.
//
// Wire formats follow the public API reference
// (https://cloud.google.com/compute/docs/reference/rest/v1): JSON bodies are
// the protojson form of the computepb messages, mutations answer an
// Operation that a client polls until DONE, synchronous errors are
// {"error":{"code","message","errors":[{reason,domain,message}],"status"}},
// and a stockout ends the insert's operation with
// ZONE_RESOURCE_POOL_EXHAUSTED and httpErrorStatusCode 503.
//
// It is test support: only e2e/cloudsim and tests import it.
package gce
