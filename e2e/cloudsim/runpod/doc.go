// Package runpod simulates RunPod's GraphQL API for the cloud simulator
// (e2e/cloudsim): POST /graphql with the operations hoist's runpod driver
// makes, parsed and validated against a subset of RunPod's schema
// (schema.graphql; https://graphql-spec.runpod.io/) with gqlparser:
// gpuTypes with lowestPrice per datacenter or country, dataCenters,
// countryCodes, pod, myself { pods containerRegistryCreds networkVolumes },
// podFindAndDeployOnDemand, podRentInterruptable, podEditJob,
// podTerminate, saveRegistryAuth, deleteRegistryAuth, createNetworkVolume
// and deleteNetworkVolume.
//
// The key is "Authorization: Bearer <key>" or ?api_key=<key>; a wrong one
// is HTTP 401. Errors are GraphQL's errors[] with message, path and
// extensions.code, at HTTP 200 next to data: the out-of-stock answer
// ("There are no longer any instances available with the requested
// specifications...", SUPPLY_CONSTRAINT) when the GPU type is not in the
// place asked or the capacity faults (keyed by GPU type id) are spent,
// "pod not found to terminate" for an unknown pod. The injected error
// rate answers HTTP 429.
//
// A pod is a simulated pod (sim.StartPod): a container of the image on the
// host network at its own 127.77.x.y address, every exposed port reachable
// there (runtime.ports, public port = private port), with the pod's env and
// dockerArgs' entrypoint and command. Interrupt stops an interruptible pod
// the way RunPod reclaims one: desiredStatus EXITED, no runtime.
//
// A network volume is a directory under the simulator's state directory
// (<state>/runpod/volumes/<id>), made by createNetworkVolume (in a known
// datacenter, 1 to 4000 GB) and removed by deleteNetworkVolume ("Tried to
// delete nonexistent network volume" for an unknown one, as dstack meets
// it). A pod deployed with networkVolumeId gets it bind-mounted at
// volumeMountPath (default /workspace; sim.PodSpec.Mounts) and goes to the
// volume's datacenter. The refusals RunPod does not document are the
// simulator's guesses, BAD_USER_INPUT: an unknown volume ("Network volume
// <id> not found"), a pod asked in another datacenter ("Network volume
// <id> is in data center <dc>; the pod must be deployed in the same data
// center, not <other>"), a community-cloud pod, and deleting a volume a
// live pod mounts ("Network volume <id> is in use by pod <pod>").
//
// It is test support: only e2e/cloudsim and tests import it.
package runpod
