package schema

func (d *dec) volume(n *node) *Volume {
	v := &Volume{AutoCleanupDuration: Off}
	bn := n.get("backend")
	if bn.isNull() {
		d.errf(n, "", "field \"backend\" is required")
		return nil
	}
	backend, ok := d.enum(bn, "backend", valuesAt("#Volume.backend")...)
	if !ok {
		return nil
	}
	v.Backend = backend
	if !d.object(n, "", fieldsAt(volumeDefs[backend])...) {
		return nil
	}
	v.Name = d.optStr(n.get("name"), "name")
	if s := n.get("size"); !s.isNull() {
		if x, ok := d.memory(s, "size"); ok {
			v.Size = f64(x)
		}
	}
	v.AutoCleanupDuration = d.idleDuration(n.get("auto_cleanup_duration"), "auto_cleanup_duration", Off)
	v.Tags = d.tags(n.get("tags"), "tags")
	v.Hoist = d.hoistOptions(n.get("hoist"))
	r := n.get("region")
	if r.isNull() && backend != "kubernetes" {
		d.errf(n, "", "field \"region\" is required")
	} else if !r.isNull() {
		v.Region, _ = d.str(r, "region")
	}
	switch backend {
	case "aws", "gcp", "azure", "runpod", "verda":
		v.VolumeID = d.optStr(n.get("volume_id"), "volume_id")
		if backend != "runpod" {
			v.AvailabilityZone = d.optStr(n.get("availability_zone"), "availability_zone")
		} else {
			d.optStr(n.get("availability_zone"), "availability_zone")
		}
		if v.VolumeID == "" && v.Size == nil {
			d.errf(n, "", "either `size` or `volume_id` must be set")
		}
		if v.VolumeID != "" && v.AutoCleanupDuration > 0 {
			d.errf(n.get("auto_cleanup_duration"), "auto_cleanup_duration", "external volumes do not support auto_cleanup_duration")
		}
	case "kubernetes":
		v.ClaimName = d.optStr(n.get("claim_name"), "claim_name")
		v.StorageClassName = d.optStr(n.get("storage_class_name"), "storage_class_name")
		v.AccessModes = []string{"ReadWriteOnce"}
		if am := n.get("access_modes"); !am.isNull() {
			v.AccessModes = d.strList(am, "access_modes")
		}
		v.ReadOnly = d.optBool(n.get("read_only"), "read_only", false)
		if v.ClaimName == "" && v.Size == nil {
			d.errf(n, "", "either `size` or `claim_name` must be set")
		}
		if v.ClaimName != "" {
			v.StorageClassName, v.AccessModes = "", nil
			if v.AutoCleanupDuration > 0 {
				d.errf(n.get("auto_cleanup_duration"), "auto_cleanup_duration", "external volumes do not support auto_cleanup_duration")
			}
		}
	}
	return v
}
