// Package kubernetes is the Kubernetes backend (dstack's `kubernetes`
// backend, src/dstack/_internal/core/backends/kubernetes): offers come from
// the cluster's nodes, an instance is a reservation of a slice of one node,
// and each job runs as a pod whose container runs the job's image with
// hoist-runner as its entrypoint (Traits.Runtime is RuntimeRunner).
//
// There is no agent on the nodes: the driver's Connector answers the shim
// API inside the server (podshim.go), turning each task into a pod, and
// reaches the runner in the pod by a port-forward through the API server, so
// no node or pod port is opened to the network. Volumes are
// PersistentVolumeClaims.
//
// Only cmd/hoist (the registry) and the driver's own tests import it.
package kubernetes
