package podcloud

import "context"

// A VolumeProvider is a Provider whose pods mount the provider's network
// volumes (RunPod's network volumes). The engine asserts it: when the
// Provider implements it, the backend New returns implements
// backends.VolumeBackend. A network volume is not attached to a running
// machine: the pod is created with it (PodSpec.Volumes), so attaching
// only checks that the volume exists where the instance's offer runs.
//
// A provider's volumes carry only a name (RunPod's have no tags or
// labels): the engine names a volume it creates hoist-<name>-<8 hex of
// the volume's hoist id> (volumeName) and keeps its tags, its provider id
// and whether hoist owns it in backends.Records, under the backend's name
// + ".volumes"; ListVolumes matches the provider's volumes to those
// records.
type VolumeProvider interface {
	Provider
	// VolumeLimits says what one pod can mount.
	VolumeLimits() VolumeLimits
	// CreateVolume creates a volume and returns it. The engine looks the
	// name up first (ListVolumes), so that a provider without idempotency
	// tokens creates no second volume for one hoist volume.
	CreateVolume(ctx context.Context, req VolumeRequest) (NetworkVolume, error)
	// GetVolume observes a volume by its provider id; an error wrapping
	// backends.ErrNotFound when the provider does not know it.
	GetVolume(ctx context.Context, id string) (NetworkVolume, error)
	// DeleteVolume deletes a volume; gone is success.
	DeleteVolume(ctx context.Context, id string) error
	// ListVolumes returns every volume of the account.
	ListVolumes(ctx context.Context) ([]NetworkVolume, error)
}

// VolumeLimits are what one pod of a VolumeProvider can mount.
type VolumeLimits struct {
	// MaxPerPod is how many network volumes one pod mounts (RunPod: 1,
	// networkVolumeId).
	MaxPerPod int
	// ReadOnly is true when a pod can mount a volume read-only (RunPod
	// cannot: its pod input has no such field).
	ReadOnly bool
}

// A VolumeRequest asks a VolumeProvider for one volume.
type VolumeRequest struct {
	// Name is the provider-visible name (volumeName).
	Name string
	// Region is where the volume lives (a RunPod datacenter id); the
	// pods that mount it must run there.
	Region string
	// SizeGB is the size in GB.
	SizeGB int
}

// A NetworkVolume is what a VolumeProvider observed of one volume.
type NetworkVolume struct {
	// ID is the provider's id, what PodVolume.ID names.
	ID string
	// Name is the volume's name at the provider.
	Name string
	// Region is where the volume lives.
	Region string
	// SizeGB is its size in GB.
	SizeGB int
}

// A PodVolume is a network volume a pod is created with.
type PodVolume struct {
	// ID is the provider's id of the volume (NetworkVolume.ID).
	ID string `json:"id"`
	// Path is the absolute path in the container.
	Path string `json:"path"`
	// ReadOnly mounts it read-only (only when VolumeLimits.ReadOnly).
	ReadOnly bool `json:"read_only,omitempty"`
}
