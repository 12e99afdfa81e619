// Package vastai is the cloud simulator's Vast.ai: the REST API under
// /api/v0 (https://docs.vast.ai/api-reference) that hoist's vastai driver
// calls, with Vast.ai's JSON shapes and error answers ({"success": false,
// "error", "msg"}; a plain-text 429 "API requests too frequent"):
//
//   - POST /bundles/ searches a small fixed market of asks (asks.go) with
//     Vast.ai's query operators;
//   - PUT /asks/<id>/ rents an ask: the instance is a simulated pod (Kind
//     "pod", sim.StartPod) running the image with onstart and args as its
//     command, its "-p P:P" env keys published on the pod's 127.77.x.y
//     address (public_ipaddr, ports["P/tcp"][0].HostPort = P: the pod
//     shares the host's network);
//   - GET /instances/, GET and DELETE /instances/<id>/.
//
// Capacity faults are per ask id (the driver's instance type): an ask
// without capacity answers success false. Interrupt stops a bid instance
// the way Vast.ai shows an outbid one: cur_state, intended_status and
// next_state all "stopped".
package vastai
