// Package gcp is the GCP backend: Compute Engine instances created with
// Google's official Go client (cloud.google.com/go/compute/apiv1, REST) and
// taken over by the shared cloud-VM engine (backends/vm) exactly as SSH-fleet
// hosts. It implements vm.Provider (insert zone by zone, observe, list by
// labels, delete; an SSH firewall rule per network, as dstack's), vm.VolumeProvider (pd-balanced persistent disks) and
// vm.PlacementProvider (compact placement resource policies).
//
// The configuration is dstack's GCP backend entry
// (src/dstack/_internal/core/backends/gcp/models.py: project_id, creds of
// type service_account or default, regions, vpc_name, public_ips,
// vm_service_account, tags) plus endpoint_url, the Compute endpoint for the
// cloud simulator (e2e/cloudsim) and private endpoints, and os_images (the
// boot image and its login user, the shape of dstack's AWS os_images). Keys
// hoist does not honour (vpc_project_id, extra_vpcs, roce_vpcs, nat_check,
// preview_features) are refused.
//
// cmd/hoist imports it (one Registry line); nothing else should.
package gcp
