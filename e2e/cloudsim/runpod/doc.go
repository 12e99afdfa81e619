// Package runpod simulates RunPod's GraphQL API for the cloud simulator
// (e2e/cloudsim): POST /graphql with the operations hoist's runpod driver
// makes, parsed and validated against a subset of RunPod's schema
// (schema.graphql; https://graphql-spec.runpod.io/) with gqlparser:
// gpuTypes with lowestPrice per datacenter or country, dataCenters,
// countryCodes, pod, myself { pods containerRegistryCreds },
// podFindAndDeployOnDemand, podRentInterruptable, podEditJob,
// podTerminate, saveRegistryAuth and deleteRegistryAuth.
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
// It is test support: only e2e/cloudsim and tests import it.
package runpod
