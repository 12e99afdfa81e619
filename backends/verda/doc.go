// Package verda is hoist's Verda (formerly DataCrunch) backend: GPU and CPU
// VMs of Verda's public REST API (https://api.verda.com/v1,
// https://docs.verda.com/api) driven by the cloud-VM engine backends/vm,
// which takes each VM over as an SSH host.
//
// The API is spoken by a small client of its own (client.go): Verda's Go
// SDK, github.com/verda-cloud/verdacloud-sdk-go, is not served by the Go
// module proxy. Authentication is OAuth2 client credentials
// (POST /oauth2/token), the access token renewed before it expires and
// once more when a call answers 401.
//
// Semantics follow dstack (src/dstack/_internal/core/backends/verda/compute.py):
// per instance an SSH key ("<hostname>-0.key") and a startup script
// ("<hostname>.sh") are created, then the instance (pricing FIXED_PRICE,
// is_spot, location_code, os_volume of the offer's disk, at least 50 GB);
// the key and the script are deleted with the instance. The login user is
// root.
//
// Verda has no tags or labels. An instance carries hoist's name as its
// hostname and hoist's ownership tags, query-encoded after "hoist ", as its
// description ("hoist hoist.installation=...&hoist.instance=..."); List
// reads them back and leaves out every instance whose description is not
// hoist's or whose tags do not match, so it never lists foreign instances.
// Launch is idempotent on the instance id by looking the hoist.instance tag
// up among the instances before creating one (Verda has no idempotency
// token; launches of one id in this process are serialized).
//
// Offers are the catalog rows of backend verda (gpuhunt's datacrunch),
// kept only where GET /instance-availability lists the instance type in the
// row's location for its spot flag, cheapest first. A spot instance Verda
// reclaims shows as discontinued: it is reported gone and interrupted.
//
// Volumes are Verda's block volumes (volumes.go; the backend is a
// backends.VolumeBackend): NVMe volumes created with POST /volumes in the
// instance's location, attached, detached and deleted (for good,
// is_permanent) with PUT /volumes. A volume has no tags or description
// either, so its name carries hoist's name and ownership tags, query-encoded
// after a "?" ("hoist-data-1a2b3c4d?hoist.installation=...&hoist.volume=...");
// ListVolumes reads them back and leaves out every other volume, and
// CreateVolume is idempotent on the hoist.volume tag as Launch is on
// hoist.instance. An attached volume shows up in the VM at /dev/<target>,
// the virtio disk name Verda reports for it ("vdb"). A volume registered by
// its id (dstack's volume_id) may have any name. The SDK notes that attach
// and detach need the instance shut down (offline); the engine attaches to
// the running VM, and a refusal is classified as any 4xx is (stalled).
// Placement groups are not offered.
package verda
