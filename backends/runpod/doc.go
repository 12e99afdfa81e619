// Package runpod is the RunPod backend: GPU pods running the job's own
// image (dstack's dockerized=false), through RunPod's GraphQL API
// (https://api.runpod.io/graphql, https://graphql-spec.runpod.io/; there
// is no Go SDK, so a small client of the documents it sends is here), as a
// podcloud.Provider for the container-cloud engine (backends/podcloud).
//
// The configuration is dstack's runpod backend entry
// (src/dstack/_internal/core/backends/runpod/models.py): creds of type
// api_key, regions (secure-cloud datacenter ids such as CA-MTL-1, and with
// community_cloud: true, community-cloud country codes such as CA) and
// community_cloud (false by default); plus endpoint_url, the GraphQL
// endpoint of the cloud simulator (e2e/cloudsim/runpod). Unknown fields are
// errors.
//
// RunPod answers most failures with HTTP 200 and errors[] (dstack's
// api_client.py): out of stock ("There are no longer any instances
// available with the requested specifications...", extensions.code
// SUPPLY_CONSTRAINT; "This machine does not have the resources to deploy
// your pod") wraps backends.ErrNoCapacity; HTTP 401/403 is stalled; 429 and
// 5xx are transient.
//
// Pods carry no labels: the ownership tags are kept as JSON in the pod's
// environment (HOIST_TAGS), which the API reads back, and ListPods lists
// only pods that carry it. The pod's command replaces the image's
// entrypoint through dockerArgs in dstack's JSON form
// ({"cmd": [...], "entrypoint": [...]}); its ports are exposed as
// "<port>/tcp" and reached at runtime.ports' public IP and port.
//
// The Provider is also a podcloud.VolumeProvider: RunPod's network volumes
// (createNetworkVolume in a secure datacenter, upper-cased;
// myself.networkVolumes; deleteNetworkVolume, "Tried to delete nonexistent
// network volume" being success), mounted by a pod only when it is
// deployed with one (networkVolumeId, volumeMountPath): one per pod,
// read-write, in the volume's datacenter. Volumes have only a name; the
// engine names them and keeps their tags (backends/podcloud).
//
// cmd/hoist imports it (one Registry line); nothing else should.
package runpod
