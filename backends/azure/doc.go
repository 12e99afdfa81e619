// Package azure is the Azure backend: it provisions virtual machines (and
// managed disks as network volumes) through azure-sdk-for-go's armcompute
// and armnetwork clients, authenticated by azidentity, and hands them to
// the cloud-VM engine (backends/vm), which takes every VM over as an SSH
// host.
//
// Its server-config entry is dstack's Azure entry
// (src/dstack/_internal/core/backends/azure/models.py): tenant_id,
// subscription_id, creds ({type: client, client_id, client_secret} or
// {type: default}), resource_group, regions, subnet_ids, public_ips,
// vm_managed_identity and tags, plus hoist's endpoint_url and
// authority_url (sovereign clouds, the simulator) and os_images. The
// Resource Manager endpoint must be https; a private CA (the simulator's)
// is trusted through SSL_CERT_FILE, which Go honours on Linux.
//
// cmd/hoist registers Factory; nothing else imports this package.
package azure
