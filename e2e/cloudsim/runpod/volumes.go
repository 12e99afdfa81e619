package runpod

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"hoist/e2e/cloudsim/sim"
)

// KindNetworkVolume is a network volume: a directory under the
// simulator's state directory (volumeDir), bound into the pods created
// with it.
const KindNetworkVolume = "network_volume"

// Extra keys of a pod created with a network volume.
const (
	extraNetworkVolume = "network_volume_id"
	extraMountPath     = "volume_mount_path"
)

// defaultMountPath is where RunPod mounts a volume a deploy names without
// volumeMountPath (RunPod's documented /workspace).
const defaultMountPath = "/workspace"

// Messages of RunPod's volume errors. msgNoVolume is
// deleteNetworkVolume's answer for an unknown volume, which dstack
// ignores (src/dstack/_internal/core/backends/runpod/compute.py). The
// others are the simulator's guesses: RunPod does not document them.
const (
	msgNoVolume         = "Tried to delete nonexistent network volume"
	msgVolumeNotFound   = "Network volume %s not found"
	msgVolumeDataCenter = "Network volume %s is in data center %s; the pod must be deployed in the same data center, not %s"
	msgVolumeInUse      = "Network volume %s is in use by pod %s"
)

// volumeDir is volume id's directory, which pods created with it mount.
func volumeDir(s *sim.Sim, id string) string {
	return filepath.Join(s.StateDir(), Name, "volumes", id)
}

func liveVolume(s *sim.Sim, id string) (sim.Resource, bool) {
	r, ok := s.Get(Name, id)
	if !ok || r.Kind != KindNetworkVolume || r.State == sim.StateDeleted {
		return sim.Resource{}, false
	}
	return r, true
}

func volumeJSON(r sim.Resource) map[string]any {
	dc := map[string]any{"id": r.Region, "name": r.Region, "location": "", "listed": true}
	for _, d := range dataCenters {
		if d[0] == r.Region {
			dc["name"], dc["location"] = d[1], d[2]
		}
	}
	return map[string]any{"__typename": "NetworkVolume", "id": r.ID, "name": r.Name, "size": r.SizeGB,
		"dataCenterId": r.Region, "dataCenter": dc}
}

// networkVolumes answers myself.networkVolumes: the account's volumes.
func networkVolumes(s *sim.Sim) []map[string]any {
	out := []map[string]any{}
	for _, r := range s.List(Name, KindNetworkVolume) {
		if r.State != sim.StateDeleted {
			out = append(out, volumeJSON(r))
		}
	}
	return out
}

// createVolume answers createNetworkVolume: a volume of size GB in a
// secure datacenter, and its directory. Names need not be unique (RunPod
// lists volumes of one name side by side).
func (p *Provider) createVolume(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	in := input(args)
	dc, size := str(in, "dataCenterId"), integer(in, "size", 0)
	known := false
	for _, d := range dataCenters {
		known = known || d[0] == dc
	}
	switch {
	case !known:
		return nil, apiError("BAD_USER_INPUT", "Invalid data center id %q", dc)
	case size < 1 || size > 4000:
		return nil, apiError("BAD_USER_INPUT", "Network volume size must be between 1 and 4000 GB")
	case strings.TrimSpace(str(in, "name")) == "":
		return nil, apiError("BAD_USER_INPUT", "name is required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.newID()[4:]
	if err := os.MkdirAll(volumeDir(s, id), 0o755); err != nil {
		return nil, internal(err)
	}
	r, err := s.Create(sim.Resource{Provider: Name, Kind: KindNetworkVolume, ID: id, Name: str(in, "name"),
		State: sim.StateAvailable, Region: dc, SizeGB: size})
	if err != nil {
		return nil, internal(err)
	}
	return volumeJSON(r), nil
}

// deleteVolume answers deleteNetworkVolume: the volume and its directory
// are gone; an unknown volume is RunPod's "Tried to delete nonexistent
// network volume", one a live pod mounts is refused.
func (p *Provider) deleteVolume(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	id := str(input(args), "id")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := liveVolume(s, id); !ok {
		return nil, apiError("", msgNoVolume)
	}
	for _, pod := range s.List(Name, KindPod) {
		if pod.State != sim.StateTerminated && pod.Extra[extraNetworkVolume] == id {
			return nil, apiError("BAD_USER_INPUT", msgVolumeInUse, id, pod.ID)
		}
	}
	if err := os.RemoveAll(volumeDir(s, id)); err != nil {
		return nil, internal(err)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		now := s.Now().UTC()
		r.State, r.TerminatedAt = sim.StateDeleted, &now
		return nil
	}); err != nil {
		return nil, internal(err)
	}
	return nil, nil
}

// deployVolume checks a deploy's networkVolumeId: the volume must exist
// and be in the deploy's datacenter dc; with no datacenter given, the pod
// goes to the volume's. It returns the datacenter.
func deployVolume(s *sim.Sim, id, dc string) (string, *gqlerror.Error) {
	v, ok := liveVolume(s, id)
	switch {
	case !ok:
		return "", apiError("BAD_USER_INPUT", msgVolumeNotFound, id)
	case dc != "" && dc != v.Region:
		return "", apiError("BAD_USER_INPUT", msgVolumeDataCenter, id, v.Region, dc)
	}
	return v.Region, nil
}

// podMounts are the bind mounts of pod r: its network volume's directory
// at its mount path.
func podMounts(s *sim.Sim, r sim.Resource) map[string]string {
	id := r.Extra[extraNetworkVolume]
	if id == "" {
		return nil
	}
	return map[string]string{volumeDir(s, id): r.Extra[extraMountPath]}
}
