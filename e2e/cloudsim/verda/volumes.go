package verda

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// Extra keys of a volume resource.
const (
	extraVolumeType = "volume_type"
	extraTarget     = "target" // the virtio disk name ("vdb") while attached
)

// volumeTypes are the block volume types (the SDK's VolumeTypes in
// verda/constants.py of github.com/DataCrunch-io/datacrunch-python).
var volumeTypes = []string{"NVMe", "HDD"}

// maxVolumeGB is the simulator's largest volume.
const maxVolumeGB = 16384

// volumeStatus maps the simulator's state onto Verda's volume statuses.
func volumeStatus(r sim.Resource) string {
	switch {
	case r.Extra[extraDeleted] == "true":
		return "deleted"
	case r.AttachedTo != "":
		return "attached"
	}
	return "detached"
}

// volumeJSON is a volume as GET /volumes shows it.
func volumeJSON(r sim.Resource) map[string]any {
	var inst, target any
	if r.AttachedTo != "" {
		inst, target = r.AttachedTo, r.Extra[extraTarget]
	}
	return map[string]any{
		"id":           r.ID,
		"name":         r.Name,
		"status":       volumeStatus(r),
		"size":         r.SizeGB,
		"type":         r.Extra[extraVolumeType],
		"is_os_volume": false,
		"location":     r.Region,
		"instance_id":  inst,
		"target":       target,
		"ssh_key_ids":  []string{},
		"created_at":   r.CreatedAt.Format(time.RFC3339Nano),
	}
}

// liveVolume returns a volume not deleted, or Verda's 404.
func liveVolume(s *sim.Sim, id string) (sim.Resource, *apiError) {
	v, ok := s.Get(Name, id)
	if !ok || v.Kind != sim.KindVolume || v.Extra[extraDeleted] == "true" {
		return sim.Resource{}, errorf(http.StatusNotFound, "not_found", "Invalid volume id")
	}
	return v, nil
}

// listVolumes is GET /volumes[?status=]: the volumes not deleted.
func listVolumes(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	want := r.URL.Query().Get("status")
	out := []map[string]any{}
	for _, v := range live(s, sim.KindVolume) {
		if want == "" || volumeStatus(v) == want {
			out = append(out, volumeJSON(v))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func getVolume(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	v, e := liveVolume(s, r.PathValue("id"))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, volumeJSON(v))
	return nil
}

// createVolume is POST /volumes {type, name, size, location_code,
// instance_id?}: the volume is made (and attached when instance_id is
// given); its id is the answer. The capacity fault "volume"
// (sim.Faults.Capacity) runs the locations out of room: 503
// service_unavailable.
func (p *Provider) createVolume(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Type         string   `json:"type"`
		Name         string   `json:"name"`
		Size         int      `json:"size"`
		LocationCode string   `json:"location_code"`
		InstanceID   *string  `json:"instance_id"`
		InstanceIDs  []string `json:"instance_ids,omitempty"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	loc := req.LocationCode
	if loc == "" {
		loc = "FIN-03" // the SDK's default location
	}
	switch {
	case !slices.Contains(volumeTypes, req.Type):
		return errorf(http.StatusBadRequest, "invalid_request", "Invalid volume type %q", req.Type)
	case req.Name == "":
		return errorf(http.StatusBadRequest, "invalid_request", "name is required")
	case req.Size < 1 || req.Size > maxVolumeGB:
		return errorf(http.StatusBadRequest, "invalid_request", "size must be between 1 and %d GB", maxVolumeGB)
	case !slices.Contains(Locations, loc):
		return errorf(http.StatusBadRequest, "invalid_request", "Invalid location code %q", loc)
	}
	if !s.Take("volume") {
		return errorf(http.StatusServiceUnavailable, "service_unavailable", "No capacity available for %s volumes in location %s", req.Type, loc)
	}
	v, err := s.Create(sim.Resource{
		Provider: Name, Kind: sim.KindVolume, ID: newID(), Name: req.Name, State: sim.StateAvailable,
		Region: loc, SizeGB: req.Size, Extra: map[string]string{extraVolumeType: req.Type},
	})
	if err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if req.InstanceID != nil && *req.InstanceID != "" {
		if e := p.attach(s, v.ID, *req.InstanceID); e != nil {
			return e
		}
	}
	writeID(w, v.ID)
	return nil
}

// volumeAction is PUT /volumes {action, id (one or a list), instance_id,
// is_permanent}: attach, detach and delete. The answer is 202 with no body.
func (p *Provider) volumeAction(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Action      string          `json:"action"`
		ID          json.RawMessage `json:"id"`
		InstanceID  string          `json:"instance_id,omitempty"`
		InstanceIDs []string        `json:"instance_ids,omitempty"`
		IsPermanent bool            `json:"is_permanent,omitempty"`
		Name        string          `json:"name,omitempty"`
		Size        int             `json:"size,omitempty"`
		Type        string          `json:"type,omitempty"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	var ids []string
	if err := json.Unmarshal(req.ID, &ids); err != nil {
		var one string
		if err := json.Unmarshal(req.ID, &one); err != nil || one == "" {
			return errorf(http.StatusBadRequest, "invalid_request", "id: a volume id or a list of them is required")
		}
		ids = []string{one}
	}
	if len(ids) == 0 {
		return errorf(http.StatusBadRequest, "invalid_request", "id: a volume id or a list of them is required")
	}
	for _, id := range ids {
		var e *apiError
		switch req.Action {
		case "attach":
			inst := req.InstanceID
			if inst == "" && len(req.InstanceIDs) == 1 {
				inst = req.InstanceIDs[0]
			}
			e = p.attach(s, id, inst)
		case "detach":
			e = p.detach(s, id)
		case "delete":
			e = p.deleteVolume(s, id)
		default:
			e = errorf(http.StatusBadRequest, "invalid_request", "action %q is not supported by the simulator", req.Action)
		}
		if e != nil {
			return e
		}
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// attach attaches volume id to instance inst at the next free virtio disk
// name.
//
// Every simulated VM runs on this host and sees the host's /dev, so the
// target is the first vdX (from vdb) that nothing in /dev has yet, not the
// first free one of the instance as on Verda: the simulator core links
// /dev/<target> to the volume's loop device (sim.AttachDisk), which is where
// hoist's driver tells the VM to look.
func (p *Provider) attach(s *sim.Sim, id, inst string) *apiError {
	p.vmu.Lock()
	defer p.vmu.Unlock()
	v, e := liveVolume(s, id)
	if e != nil {
		return e
	}
	in, ok := s.Get(Name, inst)
	if !ok || in.Kind != sim.KindInstance || in.Extra[extraDeleted] == "true" {
		return errorf(http.StatusNotFound, "not_found", "Invalid instance id")
	}
	if v.Region != in.Region {
		return errorf(http.StatusBadRequest, "invalid_request", "The volume is in %s and the instance in %s", v.Region, in.Region)
	}
	switch v.AttachedTo {
	case inst:
		return nil
	case "":
	default:
		return errorf(http.StatusBadRequest, "invalid_request", "Volume %s is already attached to instance %s", id, v.AttachedTo)
	}
	if in.State == sim.StateTerminated {
		return errorf(http.StatusBadRequest, "invalid_request", "Can't attach a volume to a discontinued instance")
	}
	used := map[string]bool{}
	for _, o := range s.List("", sim.KindVolume) {
		if o.Device != "" {
			used[o.Device] = true
		}
	}
	for _, t := range targets() {
		dev := "/dev/" + t
		if used[dev] {
			continue
		}
		if _, err := os.Lstat(dev); err == nil {
			continue
		}
		err := s.AttachDisk(Name, id, inst, dev)
		if errors.Is(err, sim.ErrDiskAttached) {
			continue // taken meanwhile by another simulator on this host
		}
		if err != nil {
			return errorf(http.StatusInternalServerError, "server_error", "%v", err)
		}
		if _, err := s.Update(Name, id, func(r *sim.Resource) error {
			r.Extra[extraTarget] = t
			return nil
		}); err != nil {
			return errorf(http.StatusInternalServerError, "server_error", "%v", err)
		}
		return nil
	}
	return errorf(http.StatusServiceUnavailable, "service_unavailable", "No free disk target for volume %s", id)
}

// targets are the virtio disk names a volume may get: vdb to vdz, then vdaa
// to vdzz.
func targets() []string {
	var out []string
	for c := 'b'; c <= 'z'; c++ {
		out = append(out, "vd"+string(c))
	}
	for a := 'a'; a <= 'z'; a++ {
		for b := 'a'; b <= 'z'; b++ {
			out = append(out, "vd"+string(a)+string(b))
		}
	}
	return out
}

// detach detaches volume id; a detached volume is left as it is.
func (p *Provider) detach(s *sim.Sim, id string) *apiError {
	p.vmu.Lock()
	defer p.vmu.Unlock()
	v, e := liveVolume(s, id)
	if e != nil {
		return e
	}
	if v.AttachedTo == "" {
		return nil
	}
	return detachDisk(s, id)
}

// detachDisk undoes attach.
func detachDisk(s *sim.Sim, id string) *apiError {
	if err := s.DetachDisk(Name, id); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		delete(r.Extra, extraTarget)
		return nil
	}); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	return nil
}

// deleteVolume deletes volume id: an attached one cannot be. Deleted
// volumes answer 404 from then on: the simulator keeps no trash, so a
// delete without is_permanent is as final.
func (p *Provider) deleteVolume(s *sim.Sim, id string) *apiError {
	p.vmu.Lock()
	defer p.vmu.Unlock()
	v, e := liveVolume(s, id)
	if e != nil {
		return e
	}
	if v.AttachedTo != "" {
		return errorf(http.StatusBadRequest, "invalid_request", "Volume %s is attached to instance %s; detach it first", id, v.AttachedTo)
	}
	if err := s.DeleteDisk(Name, id); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.Extra[extraDeleted], r.State = "true", sim.StateDeleted
		return nil
	}); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	return nil
}

// detachAll detaches the volumes attached to instance inst, as deleting an
// instance does with the volumes it is not asked to delete (volume_ids).
func detachAll(s *sim.Sim, inst string) {
	for _, v := range s.List(Name, sim.KindVolume) {
		if v.AttachedTo == inst && v.Extra[extraDeleted] != "true" {
			_ = detachDisk(s, v.ID)
		}
	}
}
