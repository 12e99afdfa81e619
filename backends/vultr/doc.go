// Package vultr is the Vultr backend: cloud instances and bare-metal servers
// created with Vultr's official Go client (github.com/vultr/govultr/v3,
// https://www.vultr.com/api/) and taken over by the shared cloud-VM engine
// (backends/vm) exactly as SSH-fleet hosts. It implements vm.Provider, as
// dstack's driver (src/dstack/_internal/core/backends/vultr/compute.py)
// does its calls: plans vbm-* are bare-metal servers (POST /v2/bare-metals,
// then the VPC attached), vcg-* cloud GPU instances booted from Ubuntu
// 22.04 (os_id 1743, with Docker's docker.io added to the cloud-config: the
// engine takes over only a VM whose Docker answers), every other plan an
// instance of Vultr's Docker image (image_id "docker"); each is attached to hoist's VPC of its region (found
// by its description hoist-vpc-<region>, created when missing) so that its
// internal_ip is the address the other nodes of a multi-node run reach it
// at; login root on port 22; no spot, no volumes, no placement groups.
// hoist attaches no firewall group, so SSH (and a gateway's 80 and 443)
// reach an instance as Vultr leaves it: open.
//
// Vultr instances carry string tags: hoist's ownership tags are put on them
// as "key=value" strings (hoist.installation=<id>, ...), so that List finds
// hoist's instances (GET with ?tag=) and never a foreign one, and Launch is
// idempotent on hoist.instance=<id>.
//
// Offers are live: the embedded catalog (gpuhunt's layout) has no vultr
// rows, so they come from GET /v2/plans and /v2/plans-metal (each plan in
// each of its locations among the configured regions, priced at the monthly
// cost / 730 hours, as gpuhunt's vultr provider does), filtered by dstack's
// plan patterns, less the plans a region's live availability (GET
// /v2/regions/{region}/availability) says cannot be deployed now, cheapest
// first.
//
// The configuration is dstack's vultr backend entry
// (src/dstack/_internal/core/backends/vultr/models.py: type, creds of type
// api_key, regions) plus endpoint_url, the API's base URL for the cloud
// simulator (e2e/cloudsim/vultr). A DELETE answering 404 is success here
// (gone), where dstack raises it.
//
// cmd/hoist imports it (one Registry line); nothing else should.
package vultr
