package backends

import (
	"context"
	"time"
)

// Optional capabilities. A caller finds them by type assertion on a Backend
// (b.(backends.VolumeBackend)); a driver guards each one it implements at
// compile time:
//
//	var _ backends.VolumeBackend = (*Backend)(nil)

// A VolumeBackend manages network volumes (dstack's ComputeWithVolumeSupport).
type VolumeBackend interface {
	Backend
	// CreateVolume creates a volume; idempotent on spec.ID, tagged with
	// spec.Tags and TagVolume: spec.ID.
	CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	// RegisterVolume adopts an existing volume by spec.ExternalID without
	// taking ownership: DeleteVolume will not delete it at the provider.
	RegisterVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	// DescribeVolume observes a volume; ErrNotFound when gone.
	DescribeVolume(ctx context.Context, id string) (Volume, error)
	// AttachVolume attaches a volume to an instance and says where it shows up.
	AttachVolume(ctx context.Context, volumeID, instanceID string) (VolumeAttachment, error)
	// DetachVolume detaches a volume; force detaches even if busy.
	// ErrNotYetTerminated (KindWait) while the detach is under way.
	DetachVolume(ctx context.Context, volumeID, instanceID string, force bool) error
	// DeleteVolume deletes an owned volume; gone is success. A volume the
	// backend keeps no record of is found by its TagVolume tag.
	DeleteVolume(ctx context.Context, id string) error
	// ListVolumes returns the volumes the provider shows with all of tags
	// (the leak audit), whatever the backend's records say, in every
	// configured region; ID is read from the TagVolume tag (volumes
	// without it are left out, and so are volumes already gone).
	ListVolumes(ctx context.Context, tags map[string]string) ([]Volume, error)
}

// A VolumeSpec asks for a volume.
type VolumeSpec struct {
	// ID is hoist's id for the volume, persisted first.
	ID string
	// Name is the volume's name in the spec.
	Name string
	// Region is where to create the volume.
	Region string
	// SizeGB is the size to create; ignored when registering.
	SizeGB float64
	// ExternalID is the provider's id of an existing volume to register
	// (for Kubernetes, the claim_name of an existing
	// PersistentVolumeClaim).
	ExternalID string
	// StorageClass is the storage class of a PersistentVolumeClaim to
	// create (dstack's storage_class_name); Kubernetes only, empty for the
	// cluster's default.
	StorageClass string
	// AccessModes are a PersistentVolumeClaim's access modes (dstack's
	// access_modes, e.g. ReadWriteOnce); Kubernetes only, empty for
	// ReadWriteOnce.
	AccessModes []string
	// Tags are the ownership tags.
	Tags map[string]string
}

// A Volume is an observed volume.
type Volume struct {
	// ID is hoist's id.
	ID string
	// ProviderID is the provider's id.
	ProviderID string
	// Region is where the volume lives.
	Region string
	// SizeGB is the actual size.
	SizeGB float64
	// Status is provider-neutral: creating, available, in-use, deleting.
	Status string
	// Owned is false for registered (external) volumes.
	Owned bool
	// Tags are the ownership tags.
	Tags map[string]string
	// CreatedAt is when the provider created the volume; zero when
	// unknown.
	CreatedAt time.Time
}

// A VolumeAttachment says where an attached volume appears on the instance.
type VolumeAttachment struct {
	// DevicePath is the block device on the instance (e.g. /dev/nvme1n1).
	DevicePath string
	// Claim is, for a backend whose tasks are pods (Kubernetes), the
	// PersistentVolumeClaim the task's pod mounts, instead of a device:
	// attaching only checks that the claim exists.
	Claim string
}

// A GatewayHost runs hoist's gateway (the hoist binary in gateway mode,
// `hoist gateway`) on one of its instances, as a process of the instance's
// host outside any container, supervised so that it outlives the server's
// connection (dstack installs its gateway on the gateway VM over SSH,
// src/dstack/_internal/server/services/gateways/__init__.py). The reconciler
// provisions the gateway's instance with Create like any other, then asks
// StartGateway; it reaches the gateway's admin API (agents/api
// GatewayClient) through Connect's HTTPClient at GatewayEndpoint.AdminURL.
type GatewayHost interface {
	Backend
	// StartGateway starts the gateway on inst, or leaves it running when it
	// already runs with the same spec; a different spec restarts it.
	StartGateway(ctx context.Context, inst Instance, spec GatewayProcess) (GatewayEndpoint, error)
	// StopGateway stops the gateway on inst; not running is success.
	StopGateway(ctx context.Context, inst Instance) error
}

// A GatewayProcess is how to run `hoist gateway` on an instance.
type GatewayProcess struct {
	// Token is the admin token the gateway demands of the server; the
	// host writes it to a file only the gateway reads, never on a command
	// line.
	Token string
}

// A GatewayEndpoint is where a started gateway answers.
type GatewayEndpoint struct {
	// AdminURL is the base URL of the admin API as seen from the instance,
	// for Conn.HTTPClient: a Unix socket of the gateway's
	// ("unix:///path/admin.sock", see agents/api BaseURL).
	AdminURL string
	// PublicAddr is the address clients reach the gateway's HTTP(S)
	// listeners at (dstack's gateway IP address): the host part of
	// HTTPAddr and HTTPSAddr as the world sees it.
	PublicAddr string
	// HTTPPort and HTTPSPort are the ports of the public listeners (80
	// and 443 on a cloud VM).
	HTTPPort, HTTPSPort int
}

// A PlacementBackend creates placement groups, so that a `placement: cluster`
// fleet's instances land close together (AWS cluster placement groups, GCP
// compact resource policies; dstack's ComputeWithPlacementGroupSupport). The
// reconciler creates one per fleet and region before the fleet's first
// instance, passes its id in InstanceSpec.PlacementGroup, and deletes it once
// the fleet's last instance is gone.
type PlacementBackend interface {
	Backend
	// CreatePlacementGroup creates a placement group; idempotent on spec.ID,
	// tagged with spec.Tags and TagPlacementGroup: spec.ID.
	CreatePlacementGroup(ctx context.Context, spec PlacementGroupSpec) (PlacementGroup, error)
	// DeletePlacementGroup deletes a placement group; gone is success, one
	// still in use is an error wrapping ErrNotYetTerminated (KindWait). A
	// group the backend keeps no record of is found by its
	// TagPlacementGroup tag.
	DeletePlacementGroup(ctx context.Context, id string) error
	// ListPlacementGroups returns the placement groups the provider shows
	// with all of tags (the leak audit), whatever the backend's records
	// say, in every configured region; ID is read from the
	// TagPlacementGroup tag (groups without it are left out).
	ListPlacementGroups(ctx context.Context, tags map[string]string) ([]PlacementGroup, error)
}

// A PlacementGroupSpec asks for a placement group.
type PlacementGroupSpec struct {
	// ID is hoist's id for the group, persisted first.
	ID string
	// Name is a human-readable name (the fleet's).
	Name string
	// Region is where the group's instances will be.
	Region string
	// Tags are the ownership tags.
	Tags map[string]string
}

// A PlacementGroup is an observed placement group.
type PlacementGroup struct {
	// ID is hoist's id.
	ID string
	// ProviderID is the provider's name or id of the group.
	ProviderID string
	// Region is where it is.
	Region string
	// Tags are the ownership tags as read back (ListPlacementGroups).
	Tags map[string]string
	// CreatedAt is when the provider created the group; zero when
	// unknown.
	CreatedAt time.Time
}

// A HostAccess backend says how to log in to its instances' hosts over SSH,
// so that a gateway on another host reaches a service's replicas there (the
// reconciler passes it in the gateway's configuration; dstack gives its
// gateway the project key the same way).
type HostAccess interface {
	Backend
	// SSHAccess returns the login to inst's host, with its host key pinned
	// and the private key read (PrivateKey set, IdentityFile empty).
	SSHAccess(ctx context.Context, inst Instance) (SSHHost, error)
}
