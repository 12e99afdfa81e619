package kubernetes

import (
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"hoist/backends"
	"hoist/backends/offers"
)

// A cluster is one configured Kubernetes cluster: its API clients and where
// the driver's objects go. The driver (driver.go) builds it from the
// server config; the pod shim (podshim.go) and the volumes use it.
type cluster struct {
	// backend is the backend's name (Instance.Backend).
	backend string
	// region is the kubeconfig context's name (dstack: the region of a
	// Kubernetes offer is its context), "in-cluster" for in-cluster config.
	region string
	// namespace is where every object the driver creates goes.
	namespace string
	// client is the typed API client.
	client kubernetes.Interface
	// rest is the config client was made from: port-forward and exec
	// streams are built from it.
	rest *rest.Config
	// agents locates hoist-runner for a node's architecture, which the pod
	// shim copies into each job's pod.
	agents backends.AgentBinaries
	// unschedulableTimeout is how long a task's pod may stay
	// unschedulable before the task fails as no capacity (config
	// `unschedulable_timeout`, default DefaultUnschedulableTimeout).
	unschedulableTimeout time.Duration
	log                  *slog.Logger
	now                  func() time.Time
}

// An instanceRecord is what the driver keeps of an instance in
// backends.Records: an instance is a reservation of a slice of a node, so
// nothing exists in the cluster for it until a task runs.
type instanceRecord struct {
	// ID is hoist's instance id.
	ID string `json:"id"`
	// Offer is the slice reserved: its resources are the requests (and
	// GPU limits) of the instance's pods.
	Offer offers.Offer `json:"offer"`
	// Tags are the ownership tags, put on every pod and secret of the
	// instance's tasks.
	Tags map[string]string `json:"tags"`
	// CreatedAt is when the instance was created.
	CreatedAt time.Time `json:"created_at"`
}
