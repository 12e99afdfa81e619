package backends

// Ownership tag keys. Every resource a backend creates carries them (as
// provider tags or labels, or in the backend's own records) so that the leak
// audit (Backend.List) finds what hoist created and deletes check ownership.
const (
	// TagInstallation identifies the hoist installation (server) that owns
	// the resource.
	TagInstallation = "hoist.installation"
	// TagProject is the project the resource belongs to.
	TagProject = "hoist.project"
	// TagResource is the spec resource (e.g. fleet/gpu-pool) the resource
	// was created for.
	TagResource = "hoist.resource"
	// TagInstance is hoist's instance id.
	TagInstance = "hoist.instance"
	// TagVolume is hoist's volume id, on the volumes a VolumeBackend
	// creates (not on registered ones): the leak audit reads it back.
	TagVolume = "hoist.volume"
	// TagPlacementGroup is hoist's placement group id, on the groups a
	// PlacementBackend creates: the leak audit reads it back.
	TagPlacementGroup = "hoist.placement_group"
)

// MatchTags reports whether have carries every key of want with the same
// value. Empty want matches everything.
func MatchTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// CopyTags returns a copy of tags (nil for nil).
func CopyTags(tags map[string]string) map[string]string {
	if tags == nil {
		return nil
	}
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = v
	}
	return out
}
