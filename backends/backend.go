package backends

import (
	"context"
	"net/http"
	"time"

	"hoist/backends/offers"
)

// A Backend provisions and terminates instances of one provider. Every method
// must be safe for concurrent use and must respect ctx.
//
// Implementations are idempotent: Create with an InstanceSpec.ID that already
// exists returns the existing instance, and Terminate of an instance that is
// already gone returns nil.
type Backend interface {
	// Name is the backend's name as configured (e.g. "local", "aws").
	Name() string
	// Offers returns what the backend can provision for q. A backend may
	// return a superset; the caller filters and ranks again.
	Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error)
	// Create starts provisioning the instance spec describes and returns
	// quickly, possibly before the instance is ready (Status provisioning).
	// The caller persists spec.ID before calling, so Create is idempotent on
	// it; every resource the backend creates carries spec.Tags.
	Create(ctx context.Context, spec InstanceSpec) (Instance, error)
	// Describe observes an instance. It returns an error wrapping
	// ErrNotFound when the instance is gone.
	Describe(ctx context.Context, id string) (Instance, error)
	// Terminate releases an instance and everything created for it. Gone is
	// success; an instance still shutting down gives an error wrapping
	// ErrNotYetTerminated of kind KindWait, to be called again later.
	Terminate(ctx context.Context, id string) error
	// List returns the instances carrying all of tags (every instance for
	// empty tags), including any a lost Create left behind: the leak audit.
	List(ctx context.Context, tags map[string]string) ([]Instance, error)
	// Traits says what kind of driver this is; callers ask it instead of
	// comparing backend names or types. It never changes over the
	// backend's life.
	Traits() Traits
}

// Traits describe a driver to the reconciler: how jobs reach its instances,
// whether it provisions hosts or takes over existing ones, and whether its
// instances share one host. The zero value (with Runtime set) is a cloud
// driver: it provisions a machine of its own for every instance.
type Traits struct {
	// Runtime is RuntimeShim or RuntimeRunner, the same for every instance
	// the driver creates (Instance.Runtime). A shim driver implements
	// Connector; so does a runner driver whose shim API the server answers
	// itself (Kubernetes: a task is a pod).
	Runtime string
	// TakesOverHosts is set when the driver provisions nothing: each
	// instance is an existing host named in InstanceSpec.Host that the
	// driver takes over (dstack's SSH fleets, ssh_config). Such a host is
	// its fleet's, whatever its offer: it is never offered to other
	// fleets, never terminated when idle, and not given up when it lacks
	// capacity.
	TakesOverHosts bool
	// SharedHost is set when every instance is a slice of one host the
	// server shares with the driver's other instances (this host): the
	// driver's offers go only to fleets that name it in `backends`, and
	// the instance of the server's own fleet of this host takes every job
	// at once instead of one at a time.
	SharedHost bool
	// LiveOffers is set when the driver's Offers are live from the
	// provider rather than rows of the offline catalog (a Kubernetes
	// cluster's nodes, Vultr's plans, the container clouds' stock): the
	// server's Market asks it as an online provider.
	LiveOffers bool
}

// An InstanceSpec asks a backend for one instance.
type InstanceSpec struct {
	// ID is hoist's own id for the instance, persisted by the caller before
	// Create; Create is idempotent on it.
	ID string
	// Name is a human-readable name (fleet name and instance number), used
	// where the provider shows names; optional.
	Name string
	// Offer is the offer to provision. SSH fleets ignore everything in it
	// but Backend: the host decides what it has.
	Offer offers.Offer
	// Tags are the ownership tags (see TagInstallation and friends) put on
	// every resource created for the instance.
	Tags map[string]string
	// Host is the host of an SSH fleet to take over; nil for cloud backends.
	Host *SSHHost
	// SSHPublicKeys are authorized on the instance for the project (cloud
	// backends that inject keys); optional.
	SSHPublicKeys []string
	// PlacementGroup is the id of the fleet's placement group (see
	// PlacementBackend) the instance must be created in; empty for none.
	PlacementGroup string
	// Gateway is set for a gateway's instance (GatewayHost): the provider's
	// firewall also opens TCP 80 and 443 to the world, as dstack's gateway
	// security group, firewall rule and NSG do.
	Gateway bool
}

// An SSHHost is one host of an SSH fleet (dstack's ssh_config host), with the
// connection settings resolved: defaults applied and secrets read.
type SSHHost struct {
	// Hostname is the address to dial, a name or an IP.
	Hostname string
	// Port is the SSH port; 0 means 22.
	Port int
	// User is the login user.
	User string
	// IdentityFile is a path to a private key on the server's file system.
	IdentityFile string
	// PrivateKey is a PEM private key (from a secret); it wins over
	// IdentityFile when both are set.
	PrivateKey []byte
	// HostKeys pins the host: public keys in authorized_keys format
	// ("ssh-ed25519 AAAA..."). Empty means trust on first use: the key seen
	// is returned in Instance.HostKey for the caller to store.
	HostKeys []string
	// KnownHosts is known_hosts content (as in ~/.ssh/known_hosts) to pin
	// the host from; used when HostKeys is empty.
	KnownHosts string
	// ProxyJump is the host to jump through, if any.
	ProxyJump *SSHHost
	// InternalIP is the address the fleet's other hosts reach this one at
	// (the fleet spec's internal_ip); "" means Hostname.
	InternalIP string
}

// Instance statuses as a backend observes them. The reconciler owns the
// richer lifecycle (pending, idle, busy, ...); a backend only says whether the
// instance is still coming up, usable, going away, or gone.
const (
	// StatusProvisioning means created but the agent is not answering yet.
	StatusProvisioning = "provisioning"
	// StatusRunning means the instance is up and its agent answers.
	StatusRunning = "running"
	// StatusTerminating means termination was requested and is under way.
	StatusTerminating = "terminating"
	// StatusTerminated means the instance is gone; Describe usually returns
	// ErrNotFound instead.
	StatusTerminated = "terminated"
)

// Runtimes say how a job gets onto an instance.
const (
	// RuntimeShim is VM-based: the shim runs on the instance and starts job
	// containers with the runner injected (dstack's dockerized=true).
	RuntimeShim = "shim"
	// RuntimeRunner is container-based: the provider runs the job's image
	// with the runner as its entrypoint (dstack's dockerized=false).
	RuntimeRunner = "runner"
)

// An Instance is what a backend observed of one instance.
type Instance struct {
	// ID is hoist's id, as given in InstanceSpec.ID.
	ID string
	// Backend is the name of the backend that owns the instance.
	Backend string
	// ProviderID is the provider's own id for the instance, if different.
	ProviderID string
	// Region is the region (or zone) the instance is in.
	Region string
	// Hostname is the address the server uses to reach the instance.
	Hostname string
	// InternalIP is the address the other instances of its fleet reach it
	// at (dstack's internal_ip): an SSH host's internal_ip, or its
	// address; the local host's loopback; a cloud VM's private IP where
	// the driver knows it; a Kubernetes instance's current pod's IP (its
	// tasks also report it, TaskInfo.InternalIP). "" when unknown: such an
	// instance cannot take a node of a multi-node run, unless its driver's
	// Runtime is RuntimeRunner (the address comes with the job's container).
	InternalIP string
	// Status is one of the Status* constants.
	Status string
	// Message explains the status, e.g. why the instance is unreachable.
	Message string
	// Unreachable is set when the backend could not reach the instance on
	// its last attempt; the caller backs off and marks the instance.
	Unreachable bool
	// Interrupted is set, with Status StatusTerminated, when the provider
	// reclaimed the instance (a spot interruption): the jobs on it end as
	// interrupted and a run retrying on `interruption` is resubmitted.
	Interrupted bool
	// Runtime is RuntimeShim or RuntimeRunner.
	Runtime string
	// Offer is what the instance actually is (for SSH hosts: what was found
	// on the host).
	Offer offers.Offer
	// Price is USD per hour.
	Price float64
	// Arch is the Go architecture of the host (amd64, arm64), when known.
	Arch string
	// HostKey is the SSH host key seen or pinned, in authorized_keys format;
	// the caller stores a first-contact key and passes it back in
	// SSHHost.HostKeys from then on.
	HostKey string
	// Tags are the ownership tags the instance carries.
	Tags map[string]string
	// CreatedAt is when the backend created the instance.
	CreatedAt time.Time
}

// A Connector gives the server a connection to an instance's shim. Every
// VM-based backend implements it, and so does the Kubernetes backend, whose
// Conn answers the shim API in the server (backends/kubernetes).
type Connector interface {
	// Connect returns a connection to the shim of inst. The caller closes it.
	Connect(ctx context.Context, inst Instance) (Conn, error)
}

// A Conn is how the server reaches the agents of one instance.
type Conn interface {
	// HTTPClient returns a client that dials addresses as seen from the
	// instance: the shim at ShimURL, and a runner at the Unix socket the
	// shim reports (api.BaseURL of TaskInfo.RunnerAddr; for the local backend
	// a plain dialer; for SSH hosts every connection is a channel of the SSH
	// connection, no agent port is public).
	HTTPClient() *http.Client
	// ShimURL is the base URL of the shim's HTTP API, e.g. http://127.0.0.1:10998.
	ShimURL() string
	// Close releases the connection; the HTTP client stops working.
	Close() error
}
