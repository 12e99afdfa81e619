package schema

// resources decodes a resources block with dstack's defaults.
func (d *dec) resources(n *node, path string) Resources {
	r := Resources{
		CPU:    CPU{Count: Range{Min: f64(2)}},
		Memory: Range{Min: f64(8)},
		GPU:    GPU{Count: Range{Min: f64(0)}},
		Disk:   &Disk{Size: Range{Min: f64(100)}},
	}
	if n.isNull() {
		return r
	}
	if !d.object(n, path, fieldsAt("#Resources")...) {
		return r
	}
	if c := n.get("cpu"); c != nil {
		r.CPU = d.cpu(c, join(path, "cpu"))
	}
	if m := n.get("memory"); m != nil {
		if v, ok := d.memRange(m, join(path, "memory")); ok {
			r.Memory = v
		}
	}
	if s := n.get("shm_size"); !s.isNull() {
		if v, ok := d.memory(s, join(path, "shm_size")); ok {
			r.ShmSize = f64(v)
		}
	}
	if g := n.get("gpu"); !g.isNull() {
		r.GPU = d.gpu(g, join(path, "gpu"))
	}
	if n.has("disk") {
		dn := n.get("disk")
		if dn.isNull() {
			r.Disk = nil
		} else {
			p := join(path, "disk")
			if dn.kind == nMap && dn.has("size") {
				if d.object(dn, p, fieldsAt("#Disk{size}")...) {
					if v, ok := d.memRange(dn.get("size"), join(p, "size")); ok {
						r.Disk = &Disk{Size: v}
					}
				}
			} else if dn.kind == nMap {
				d.errf(dn, p, "field \"size\" is required")
			} else if v, ok := d.memRange(dn, p); ok {
				r.Disk = &Disk{Size: v}
			}
		}
	}
	return r
}

func (d *dec) cpu(n *node, path string) CPU {
	def := CPU{Count: Range{Min: f64(2)}}
	switch n.kind {
	case nInt, nString, nBool:
		// dstack parses an int as its text: "-1" is not a count.
		c, err := ParseCPU(n.scalarText())
		if err != nil {
			d.errf(n, path, "%v", err)
			return def
		}
		return c
	case nMap:
		// {min, max} is the legacy count form.
		onlyMinMax := len(n.keys) > 0
		for _, k := range n.keys {
			if k.str != "min" && k.str != "max" {
				onlyMinMax = false
			}
		}
		if onlyMinMax {
			if r, ok := d.intRange(n, path); ok {
				return CPU{Count: r}
			}
			return def
		}
		if !d.object(n, path, fieldsExcept("#CPU", "min", "max")...) {
			return def
		}
		c := def
		if a := n.get("arch"); !a.isNull() {
			if s, ok := d.str(a, join(path, "arch")); ok {
				arch, err := ParseCPUArch(s)
				if err != nil {
					d.errf(a, join(path, "arch"), "%v", err)
				}
				c.Arch = arch
			}
		}
		if cn := n.get("count"); cn != nil {
			if r, ok := d.intRange(cn, join(path, "count")); ok {
				c.Count = r
			}
		}
		return c
	}
	d.errf(n, path, "expected a CPU spec, got %s", n.describe())
	return def
}

func (d *dec) gpu(n *node, path string) GPU {
	def := GPU{Count: Range{Min: f64(1)}}
	switch n.kind {
	case nInt, nString, nBool:
		// dstack parses an int (and, being Python, a bool) as its text.
		g, err := ParseGPU(n.scalarText())
		if err != nil {
			d.errf(n, path, "%v", err)
			return def
		}
		return g
	case nMap:
		if !d.object(n, path, fieldsAt("#GPU")...) {
			return def
		}
		g := def
		if v := n.get("vendor"); !v.isNull() {
			if s, ok := d.str(v, join(path, "vendor")); ok {
				vendor, err := ParseGPUVendor(s)
				if err != nil {
					d.errf(v, join(path, "vendor"), "%v", err)
				}
				g.Vendor = vendor
			}
		}
		if v := n.get("name"); !v.isNull() {
			if v.kind == nList {
				g.Names = d.strList(v, join(path, "name"))
			} else if s, ok := d.str(v, join(path, "name")); ok {
				g.Names = []string{s}
			}
			g.Names = normalizeGPUNames(g.Names)
		}
		if v := n.get("count"); v != nil {
			if r, ok := d.intRange(v, join(path, "count")); ok {
				g.Count = r
			}
		}
		if v := n.get("memory"); !v.isNull() {
			if r, ok := d.memRange(v, join(path, "memory")); ok {
				g.Memory = &r
			}
		}
		if v := n.get("total_memory"); !v.isNull() {
			if r, ok := d.memRange(v, join(path, "total_memory")); ok {
				g.TotalMemory = &r
			}
		}
		if v := n.get("compute_capability"); !v.isNull() {
			p := join(path, "compute_capability")
			switch v.kind {
			case nFloat, nString:
				cc, err := ParseComputeCapability(v.scalarText())
				if err != nil {
					d.errf(v, p, "%v", err)
				}
				g.ComputeCapability = cc
			case nList:
				if len(v.items) != 2 {
					d.errf(v, p, "invalid compute capability: expected [major, minor]")
					break
				}
				a, ok1 := d.integer(v.items[0], p)
				b, ok2 := d.integer(v.items[1], p)
				if ok1 && ok2 {
					g.ComputeCapability = []int{int(a), int(b)}
				}
			default:
				d.errf(v, p, "invalid compute capability: %s", v.scalarText())
			}
		}
		return g
	}
	d.errf(n, path, "expected a GPU spec, got %s", n.describe())
	return def
}

// inferGPUVendor applies dstack's server-side vendor inference.
func inferGPUVendor(g *GPU, image string, docker bool) {
	if g.Vendor != "" || (g.Count.Max != nil && *g.Count.Max == 0) {
		return
	}
	if len(g.Names) == 0 {
		if image == "" && !docker {
			g.Vendor = VendorNVIDIA
		}
		return
	}
	vendors := map[string]bool{}
	for _, n := range g.Names {
		vs := GPUVendorsByName(n)
		if len(vs) == 0 {
			vendors[""] = true
		}
		for _, v := range vs {
			vendors[v] = true
		}
	}
	if len(vendors) == 1 {
		for v := range vendors {
			g.Vendor = v
		}
	}
}

// vendorsRequiringImage returns the accelerator vendors a GPU spec asks
// for that dstack's default (CUDA) image does not support.
func vendorsRequiringImage(g GPU, image string, docker bool) []string {
	if image != "" || docker || (g.Count.Max != nil && *g.Count.Max == 0) {
		return nil
	}
	set := map[string]bool{}
	if g.Vendor != "" {
		set[g.Vendor] = true
	} else {
		for _, n := range g.Names {
			for _, v := range GPUVendorsByName(n) {
				set[v] = true
			}
		}
	}
	delete(set, VendorNVIDIA)
	delete(set, VendorGoogle)
	return sortedKeys(set)
}

// checkImageCompat applies dstack's submit-time checks that the default
// image suits the requested accelerator and CPU architecture. at is where
// to report (the resources node or the group).
func (d *dec) checkImageCompat(at, atCPU *node, path string, r Resources, image string, docker bool) {
	if vs := vendorsRequiringImage(r.GPU, image, docker); len(vs) > 0 {
		d.errf(at, path, "`image` must be set when the requested accelerator is not supported by the default image: %v", vs)
	}
	if r.CPU.Arch == "arm" {
		if docker {
			d.errf(atCPU, path, "`docker: true` is not supported on ARM CPU")
		} else if image == "" {
			d.errf(atCPU, path, "`image` must be set when ARM CPU requested")
		}
	}
}

// resourcesAt returns the node to report resource problems at.
func resourcesAt(n *node, sub string) *node {
	r := n.get("resources")
	if r == nil {
		return n
	}
	if g := r.get(sub); g != nil {
		return g
	}
	return r
}
