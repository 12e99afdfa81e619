// Package vm is the engine every cloud-VM driver (aws, gcp, azure) builds on:
// it implements backends.Backend, backends.Connector, backends.HostAccess
// and backends.GatewayHost (plus
// backends.VolumeBackend and backends.PlacementBackend when the provider
// supports them) over a small per-cloud Provider that only launches,
// observes, lists and deletes VMs.
//
// One bootstrap path: the engine generates an ed25519 key per instance (kept,
// encrypted, in backends.Records), hands its public key to the provider (EC2
// key pair, GCP metadata ssh-keys, Azure osProfile), waits for the VM to run,
// and then takes it over exactly as an SSH-fleet host, through
// backends/sshfleet used as a library (host key pinned from the console
// output when the provider shows it, else first contact). A VM that does not
// come up within the boot timeout is deleted and reported as
// backends.ErrNoCapacity, so that the reconciler tries the next offer, as
// dstack does (src/dstack/_internal/server/background/tasks/process_instances.py).
//
// Offers come from the daemon's offline catalog (backends.Deps.Catalog), the
// rows of the driver's type narrowed to its configured regions.
//
// Driver packages under backends/ import it; nothing else should.
package vm
