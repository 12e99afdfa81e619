// Package lambda is the Lambda Cloud backend: on-demand VMs launched through
// Lambda's REST API (https://docs.lambda.ai/api/cloud; there is no official
// Go SDK, so a small client of the calls it uses is here) and taken over by
// the shared cloud-VM engine (backends/vm) exactly as SSH-fleet hosts. It
// implements vm.Provider: launch, observe, terminate, list; Lambda has no
// spot instances, volumes hoist can attach, or placement groups.
//
// The configuration is dstack's lambda backend entry
// (src/dstack/_internal/core/backends/lambdalabs/models.py: creds of type
// api_key, regions) plus endpoint_url, the API base URL for the cloud
// simulator (e2e/cloudsim), and os_images (the image family to launch and
// its login user, the shape of dstack's AWS os_images; without it Lambda's
// default image, Lambda Stack, logged into as ubuntu with sudo).
//
// Lambda has no tags. A launch names the instance hoist-<resource>-<8 hex>
// (vm.ResourceName) followed by -<6 hex> of the installation's id, and
// registers the instance's own SSH key under that same name (Lambda's SSH
// keys are account-wide); terminating deletes the key. The ownership tags
// live in the backend's records, keyed by that name, written before the
// launch: List returns only instances whose name carries this
// installation's marker and has a record, so it never lists an instance
// hoist did not launch (another installation's, the user's own). A record
// whose instance is gone (terminated outside hoist, a launch that never
// happened) is deleted by List, with its SSH key, once ten minutes old.
//
// Offers are the catalog rows of backend lambda (gpuhunt's lambdalabs
// file) with live availability from GET /instance-types: a row whose region
// is in its type's regions_with_capacity_available is available, any other
// not_available and ordered after the available ones (dstack's
// lambdalabs compute.py, get_offers).
//
// cmd/hoist imports it (one Registry line); nothing else should.
package lambda
