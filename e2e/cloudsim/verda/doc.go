// Package verda simulates Verda's public REST API (formerly DataCrunch,
// https://api.verda.com/v1, documented at https://docs.verda.com/api) for
// the cloud simulator (e2e/cloudsim): the OAuth2 client-credentials token
// endpoint, instance availability, SSH keys, startup scripts, instances and
// block volumes, enough for hoist's verda driver.
//
// Wire formats follow the public API: JSON bodies, ids created by POST
// answered as plain text, errors as {"code","message"} with the codes
// invalid_request (400), unauthorized_request (401), forbidden_action
// (403), not_found (404) and service_unavailable (503). Two answers are the
// simulator's choice where the public documentation says nothing exact: a
// rate limit is 429 {"code":"too_many_requests"}, and an instance type out
// of capacity in a location is 503 service_unavailable with a message
// saying so.
//
// Verda has no tags: what an instance carries is its hostname and
// description, and the simulator keeps them as given; a volume has only its
// name.
//
// Volumes (GET, POST and PUT /volumes, GET /volumes/{id}) are backed by the
// simulator core's disks (sim.AttachDisk): attaching one gives it a virtio
// target ("vdb") and links /dev/<target> to its loop device, where the VM
// (a process on this host) finds it. As the simulated VMs share the host's
// /dev, a target is unique on the host rather than per instance, and is
// never a name /dev already has. Verda's SDK says attach and detach need the
// instance shut down; the simulator attaches to a running one, as hoist
// does. Deleting an instance detaches its volumes; deleting a volume is
// final (no trash), and an attached one cannot be deleted.
//
// It is test support: only e2e/cloudsim and tests import it.
package verda
