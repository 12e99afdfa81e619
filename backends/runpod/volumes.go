package runpod

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"hoist/backends"
	"hoist/backends/podcloud"
)

var _ podcloud.VolumeProvider = (*Provider)(nil)

// msgVolumeNotFound is deleteNetworkVolume's answer for a volume RunPod
// does not know, which dstack ignores
// (src/dstack/_internal/core/backends/runpod/compute.py, delete_volume).
const msgVolumeNotFound = "tried to delete nonexistent network volume"

// VolumeLimits: a RunPod pod mounts one network volume, read-write, set
// at deploy (networkVolumeId and volumeMountPath; RunPod cannot attach a
// volume to a running pod, and its deploy inputs have no read-only flag).
func (p *Provider) VolumeLimits() podcloud.VolumeLimits {
	return podcloud.VolumeLimits{MaxPerPod: 1}
}

// wireVolume is a NetworkVolume as myself.networkVolumes and
// createNetworkVolume answer it.
type wireVolume struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Size       int    `json:"size"`
	DataCenter *struct {
		ID string `json:"id"`
	} `json:"dataCenter"`
}

func (w wireVolume) volume() podcloud.NetworkVolume {
	nv := podcloud.NetworkVolume{ID: w.ID, Name: w.Name, SizeGB: w.Size}
	if w.DataCenter != nil {
		nv.Region = w.DataCenter.ID
	}
	return nv
}

// CreateVolume creates a network volume of req.SizeGB in datacenter
// req.Region, upper-cased as dstack sends it (createNetworkVolume;
// compute.py, create_volume). Network volumes exist in the secure cloud's
// datacenters only.
func (p *Provider) CreateVolume(ctx context.Context, req podcloud.VolumeRequest) (podcloud.NetworkVolume, error) {
	dc := strings.ToUpper(req.Region)
	if !secureRegion(dc) {
		return podcloud.NetworkVolume{}, backends.Stalled(fmt.Errorf("runpod: region %q is not a datacenter: network volumes live in secure-cloud datacenters (e.g. US-TX-3)", req.Region))
	}
	in := map[string]any{"name": req.Name, "size": req.SizeGB, "dataCenterId": dc}
	var out struct {
		CreateNetworkVolume *wireVolume `json:"createNetworkVolume"`
	}
	if err := p.api.do(ctx, "createNetworkVolume", mutationCreateVolume, map[string]any{"input": in}, &out); err != nil {
		return podcloud.NetworkVolume{}, classify(err)
	}
	if out.CreateNetworkVolume == nil || out.CreateNetworkVolume.ID == "" {
		return podcloud.NetworkVolume{}, backends.Transient(errors.New("runpod: createNetworkVolume returned no volume"))
	}
	nv := out.CreateNetworkVolume.volume()
	if nv.Region == "" {
		nv.Region = dc
	}
	if nv.Name == "" {
		nv.Name = req.Name
	}
	p.log.Info("volume_created", "volume", nv.ID, "name", req.Name, "region", dc, "size_gb", req.SizeGB)
	return nv, nil
}

// GetVolume finds volume id among the account's (RunPod has no query of
// one volume; dstack lists them too, api_client.py get_network_volume).
func (p *Provider) GetVolume(ctx context.Context, id string) (podcloud.NetworkVolume, error) {
	all, err := p.ListVolumes(ctx)
	if err != nil {
		return podcloud.NetworkVolume{}, err
	}
	for _, nv := range all {
		if nv.ID == id {
			return nv, nil
		}
	}
	return podcloud.NetworkVolume{}, fmt.Errorf("runpod: network volume %s: %w", id, backends.ErrNotFound)
}

// DeleteVolume deletes a network volume; RunPod's "Tried to delete
// nonexistent network volume" is success.
func (p *Provider) DeleteVolume(ctx context.Context, id string) error {
	err := p.api.do(ctx, "deleteNetworkVolume", mutationDeleteVolume, map[string]any{"input": map[string]any{"id": id}}, nil)
	if err != nil && !volumeNotFound(err) {
		return classify(err)
	}
	if err == nil {
		p.log.Info("volume_deleted", "volume", id)
	}
	return nil
}

// ListVolumes returns the account's network volumes (myself.networkVolumes).
func (p *Provider) ListVolumes(ctx context.Context) ([]podcloud.NetworkVolume, error) {
	var out struct {
		Myself *struct {
			NetworkVolumes []wireVolume `json:"networkVolumes"`
		} `json:"myself"`
	}
	if err := p.api.do(ctx, "myself.networkVolumes", queryVolumes, nil, &out); err != nil {
		return nil, classify(err)
	}
	if out.Myself == nil {
		return nil, backends.Transient(errors.New("runpod: myself is null"))
	}
	vols := make([]podcloud.NetworkVolume, 0, len(out.Myself.NetworkVolumes))
	for _, w := range out.Myself.NetworkVolumes {
		vols = append(vols, w.volume())
	}
	return vols, nil
}

// volumeNotFound reports whether err is deleteNetworkVolume's answer for
// a volume RunPod does not know.
func volumeNotFound(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, ge := range ae.Errors {
		if strings.Contains(strings.ToLower(ge.Message), msgVolumeNotFound) {
			return true
		}
	}
	return false
}
