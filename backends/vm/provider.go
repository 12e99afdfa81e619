package vm

import (
	"context"
	"time"

	"hoist/backends/offers"
)

// A Provider is what a cloud driver implements for the engine: the few calls
// that differ between clouds. Every method must be safe for concurrent use
// and respect ctx. Errors are classified as the engine's callers expect:
// capacity errors wrap backends.ErrNoCapacity, a resource the provider no
// longer knows wraps backends.ErrNotFound, throttling and 5xx responses are
// backends.Transient, bad configuration or credentials are
// backends.Stalled.
type Provider interface {
	// Launch asks for one VM and returns once the provider accepted it
	// (the VM is usually still pending). It is idempotent on req.ID: a
	// second Launch with the same ID returns the VM of the first (EC2
	// ClientToken, GCP requestId, Azure VM name). Capacity errors wrap
	// backends.ErrNoCapacity; throttling and 5xx are transient; bad
	// configuration is stalled.
	Launch(ctx context.Context, req LaunchRequest) (Machine, error)
	// Get observes a VM by its Ref. It returns an error wrapping
	// backends.ErrNotFound when the provider no longer knows the VM.
	Get(ctx context.Context, ref string) (Machine, error)
	// Delete asks the provider to delete the VM and its boot disk. A VM
	// already gone is success; Delete need not wait for the VM to go.
	Delete(ctx context.Context, ref string) error
	// List returns the VMs carrying all of tags (the leak audit), in every
	// configured region. VMs already gone may be left out.
	List(ctx context.Context, tags map[string]string) ([]Machine, error)
}

// A LaunchRequest asks a Provider for one VM.
type LaunchRequest struct {
	// ID is hoist's instance id, the idempotency token of the launch
	// (EC2 ClientToken, GCP requestId, Azure VM name).
	ID string
	// Name is the provider-visible unique name, hoist-<resource>-<8 hex>
	// cut to the provider's maximum length (Config.MaxNameLen).
	Name string
	// Offer is what to launch: Instance (the instance type), Region (a
	// region or a zone), Spot and DiskGB (the root disk; 0 for the
	// provider's default).
	Offer offers.Offer
	// User is the login user the key is for (from the image
	// configuration).
	User string
	// PublicKey is the authorized_keys line ("ssh-ed25519 AAAA... hoist")
	// to inject by the provider's own mechanism.
	PublicKey string
	// UserData is a #cloud-config document authorizing PublicKey for User
	// (ssh_authorized_keys, dstack's way); a provider may ignore it when
	// its own mechanism already injects the key.
	UserData string
	// Tags are the ownership tags (backends.Tag*), sanitized by the
	// provider for its rules (GCP label keys, ...).
	Tags map[string]string
	// PlacementGroup is the provider's name of the placement group or
	// resource policy (as returned by PlacementProvider) to launch in; ""
	// for none.
	PlacementGroup string
	// Gateway asks the provider's firewall to also let TCP 80 and 443 in
	// from anywhere (backends.InstanceSpec.Gateway).
	Gateway bool
}

// VM states as the engine sees them; a Provider maps its own states onto
// them.
const (
	// StatePending means the VM is being created or is booting.
	StatePending = "pending"
	// StateRunning means the VM runs (its sshd may still be starting).
	StateRunning = "running"
	// StateStopping means the VM is shutting down or being deleted.
	StateStopping = "stopping"
	// StateGone means the VM is terminated or deleted.
	StateGone = "gone"
)

// A Machine is what a Provider observed of one VM.
type Machine struct {
	// Ref is enough for Get and Delete: "us-east-1/i-0abc", "zone/name",
	// "resource-group/name".
	Ref string
	// State is one of the State* constants.
	State string
	// Address is the address to SSH to: the public IP, or the private one
	// when the backend is configured without public IPs.
	Address string
	// PrivateAddress is the VM's private IP, the address the other VMs of
	// its network reach it at (dstack's internal_ip); "" when unknown.
	PrivateAddress string
	// Region is the region or zone the VM landed in.
	Region string
	// InstanceType is the instance type the VM runs as, when known.
	InstanceType string
	// HostKeys are the sshd host keys in authorized_keys format, read from
	// the console output when the provider shows them; empty means first
	// contact.
	HostKeys []string
	// Interrupted is set when the provider reclaimed a spot VM.
	Interrupted bool
	// Message is the provider's status message, if any.
	Message string
	// Tags are the ownership tags as read back, unsanitized to the
	// backends.Tag* keys.
	Tags map[string]string
	// CreatedAt is when the provider launched the VM; zero when unknown.
	CreatedAt time.Time
}

// A VolumeProvider is a Provider that also manages network volumes (EBS
// volumes, persistent disks, managed disks). The engine asserts it: when the
// Provider implements it, the backend implements backends.VolumeBackend.
type VolumeProvider interface {
	Provider
	// CreateVolume creates a volume, idempotent on req.ID; tagged with
	// req.Tags.
	CreateVolume(ctx context.Context, req VolumeRequest) (Disk, error)
	// GetVolume observes a volume by its Ref (for a registered volume, the
	// user's volume_id); an error wrapping backends.ErrNotFound when gone.
	GetVolume(ctx context.Context, ref string) (Disk, error)
	// AttachVolume attaches volume volRef to VM machineRef and returns the
	// device path the volume shows up at on the VM (e.g.
	// /dev/disk/by-id/google-<deviceName>). Attaching a volume already
	// attached to that VM returns its path again.
	AttachVolume(ctx context.Context, volRef, machineRef string) (devicePath string, err error)
	// DetachVolume detaches volume volRef from VM machineRef; force
	// detaches even when busy. Not attached is success; a detach still
	// under way is an error wrapping backends.ErrNotYetTerminated (Wait).
	DetachVolume(ctx context.Context, volRef, machineRef string, force bool) error
	// DeleteVolume deletes a volume; gone is success.
	DeleteVolume(ctx context.Context, ref string) error
	// ListVolumes returns the volumes carrying all of tags (the leak
	// audit), in every configured region; volumes already gone may be
	// left out.
	ListVolumes(ctx context.Context, tags map[string]string) ([]Disk, error)
}

// A VolumeRequest asks a VolumeProvider for one volume.
type VolumeRequest struct {
	// ID is hoist's volume id, the idempotency token.
	ID string
	// Name is the provider-visible unique name, hoist-<volume>-<8 hex> cut
	// to the provider's maximum length.
	Name string
	// Region is the region or zone to create the volume in.
	Region string
	// SizeGB is the size in GB.
	SizeGB int
	// Tags are the ownership tags, sanitized by the provider.
	Tags map[string]string
}

// Volume states as the engine sees them; a VolumeProvider maps its own
// states onto them (they are also backends.Volume.Status values).
const (
	DiskCreating  = "creating"
	DiskAvailable = "available"
	DiskInUse     = "in-use"
	DiskDeleting  = "deleting"
	DiskGone      = "gone"
)

// A Disk is what a VolumeProvider observed of one volume.
type Disk struct {
	// Ref is enough for GetVolume, AttachVolume, DetachVolume and
	// DeleteVolume ("us-east-1/vol-0abc", "zone/name", "rg/name").
	Ref string
	// Region is the region or zone of the volume.
	Region string
	// SizeGB is the size in GB.
	SizeGB int
	// State is one of the Disk* constants.
	State string
	// AttachedTo is the Ref of the VM the volume is attached to, if any.
	AttachedTo string
	// Tags are the ownership tags as read back, unsanitized to the
	// backends.Tag* keys.
	Tags map[string]string
	// CreatedAt is when the provider created the volume; zero when
	// unknown.
	CreatedAt time.Time
}

// A PlacementProvider is a Provider that also manages placement groups (AWS
// cluster placement groups, GCP compact placement resource policies). The
// engine asserts it: when the Provider implements it, the backend implements
// backends.PlacementBackend.
type PlacementProvider interface {
	Provider
	// CreatePlacementGroup creates a placement group named name in region,
	// tagged with tags, and returns its ref (given back in
	// LaunchRequest.PlacementGroup and DeletePlacementGroup). It is
	// idempotent on name: an existing group of that name is returned.
	CreatePlacementGroup(ctx context.Context, name, region string, tags map[string]string) (ref string, err error)
	// DeletePlacementGroup deletes a placement group; gone is success, a
	// group still in use is an error wrapping backends.ErrNotYetTerminated
	// (backends.Wait).
	DeletePlacementGroup(ctx context.Context, ref string) error
	// ListPlacementGroups returns the placement groups carrying all of
	// tags (the leak audit), in every configured region.
	ListPlacementGroups(ctx context.Context, tags map[string]string) ([]Group, error)
}

// A Group is what a PlacementProvider observed of one placement group.
type Group struct {
	// Ref is what CreatePlacementGroup returned for it: enough for
	// DeletePlacementGroup and LaunchRequest.PlacementGroup.
	Ref string
	// Region is the region of the group.
	Region string
	// Tags are the ownership tags as read back, unsanitized to the
	// backends.Tag* keys.
	Tags map[string]string
	// CreatedAt is when the provider created the group; zero when
	// unknown.
	CreatedAt time.Time
}
