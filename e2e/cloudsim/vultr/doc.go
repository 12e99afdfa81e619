// Package vultr simulates the Vultr API v2 (https://www.vultr.com/api/) for
// hoist's vultr backend: cloud and bare-metal instances, VPCs and plans over
// the shared simulator core (package sim), whose VMs are real sshd
// processes. It speaks the wire format github.com/vultr/govultr/v3 reads:
// JSON bodies under "instance", "bare_metal", "vpc" and their lists with
// meta.links cursors, errors as {"error", "status"}, Bearer API keys (401
// otherwise), 429 when the fault injection throttles a call and 400 with an
// out-of-stock message when a plan has no capacity left.
package vultr
