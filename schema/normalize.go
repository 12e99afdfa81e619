package schema

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"
)

var envStringRE = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(=.*\n?$|\n?$)`)

// Field lists per object, shared by the Go decoder's strict checks.
var (
	profileFields = []string{"backends", "regions", "availability_zones", "instance_types", "reservation",
		"spot_policy", "retry", "max_duration", "stop_duration", "max_price", "creation_policy",
		"idle_duration", "utilization_policy", "startup_order", "stop_criteria", "schedule", "fleets",
		"instances", "tags", "backend_options"}
	baseRunFields = []string{"type", "name", "image", "user", "privileged", "entrypoint", "working_dir",
		"home_dir", "registry_auth", "python", "nvcc", "single_branch", "env", "shell", "resources",
		"priority", "volumes", "docker", "repos", "files", "dstack", "setup"}
	taskFields    = concat(baseRunFields, profileFields, []string{"commands", "ports", "nodes", "groups"})
	devEnvFields  = concat(baseRunFields, profileFields, []string{"ports", "ide", "version", "init", "inactivity_duration"})
	serviceFields = concat(baseRunFields, profileFields, []string{"commands", "port", "gateway", "strip_prefix",
		"model", "https", "auth", "scaling", "rate_limits", "probes", "replicas", "groups"})
	fleetFields = []string{"type", "name", "placement", "blocks", "nodes", "reservation", "resources", "backends",
		"regions", "availability_zones", "instance_types", "spot_policy", "retry", "max_price", "idle_duration",
		"tags", "backend_options", "ssh_config", "env"}
	gatewayFields = []string{"type", "name", "default", "backend", "region", "instance_type", "domain",
		"public_ip", "certificate", "replicas", "tags", "router", "hoist"}
	topFields = map[Kind][]string{KindTask: taskFields, KindService: serviceFields,
		KindDevEnvironment: devEnvFields, KindFleet: fleetFields, KindGateway: gatewayFields}
	resourcesFields = []string{"cpu", "memory", "shm_size", "gpu", "disk"}
	backendTypes    = []string{"amddevcloud", "aws", "azure", "cloudrift", "crusoe", "cudo", "datacrunch",
		"digitalocean", "dstack", "gcp", "hotaisle", "jarvislabs", "kubernetes", "lambda", "remote", "nebius",
		"oci", "runpod", "tensordock", "vastai", "verda", "vultr", "slurm",
		"local"} // "local" is hoist's own: this host through Docker
	retryEvents = []string{"no-capacity", "interruption", "error"}
)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

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
	if !d.object(n, path, resourcesFields...) {
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
				if d.object(dn, p, "size") {
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
		if !d.object(n, path, "arch", "count") {
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
		if !d.object(n, path, "vendor", "name", "count", "memory", "total_memory", "compute_capability") {
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

func (d *dec) ports(n *node, path string) []PortMapping {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []PortMapping
	for i, it := range n.items {
		if it.kind == nFloat {
			// dstack's shorthand takes ints and strings only here.
			d.errf(it, idx(path, i), "expected a port mapping, got float")
			continue
		}
		if pm, ok := d.port(it, idx(path, i)); ok {
			out = append(out, pm)
		}
	}
	return out
}

func (d *dec) port(n *node, path string) (PortMapping, bool) {
	switch n.kind {
	case nInt, nBool, nFloat:
		p, ok := d.portNum(n, path)
		if !ok {
			return PortMapping{}, false
		}
		return PortMapping{LocalPort: &p, ContainerPort: p}, true
	case nString:
		pm, err := ParsePort(n.str)
		if err != nil {
			d.errf(n, path, "%v", err)
			return PortMapping{}, false
		}
		return pm, true
	case nMap:
		if !d.object(n, path, "local_port", "container_port") {
			return PortMapping{}, false
		}
		var pm PortMapping
		cp := n.get("container_port")
		if cp.isNull() {
			d.errf(n, path, "field \"container_port\" is required")
			return PortMapping{}, false
		}
		v, ok := d.portNum(cp, join(path, "container_port"))
		if !ok {
			return PortMapping{}, false
		}
		pm.ContainerPort = v
		if lp := n.get("local_port"); !lp.isNull() {
			v, ok := d.portNum(lp, join(path, "local_port"))
			if !ok {
				return PortMapping{}, false
			}
			pm.LocalPort = &v
		}
		return pm, true
	}
	d.errf(n, path, "expected a port mapping, got %s", n.describe())
	return PortMapping{}, false
}

func (d *dec) portNum(n *node, path string) (int, bool) {
	v, ok := d.integer(n, path)
	if !ok {
		return 0, false
	}
	if v < 1 || v > 65535 {
		d.errf(n, path, "invalid port %d: must be between 1 and 65535", v)
		return 0, false
	}
	return int(v), true
}

func (d *dec) volumes(n *node, path string) []MountPoint {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []MountPoint
	for i, it := range n.items {
		p := idx(path, i)
		switch it.kind {
		case nString:
			mp, err := ParseMountPoint(it.str)
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
			out = append(out, mp)
		case nMap:
			if it.has("instance_path") {
				if !d.object(it, p, "instance_path", "path", "optional") {
					continue
				}
				ip := d.mountPath(it, p, "instance_path")
				pp := d.mountPath(it, p, "path")
				opt := d.optBool(it.get("optional"), join(p, "optional"), false)
				if ip != "" && pp != "" {
					out = append(out, MountPoint{InstancePath: ip, Path: pp, Optional: opt})
				}
				continue
			}
			// `optional` is accepted here too: dstack's docs show it on the
			// object form (guides/protips.md), though its model rejects it.
			if !d.object(it, p, "name", "path", "optional") {
				continue
			}
			nm := it.get("name")
			var names []string
			switch {
			case nm.isNull():
				d.errf(it, p, "field \"name\" is required")
				continue
			case nm.kind == nList:
				names = d.strList(nm, join(p, "name"))
			default:
				if s, ok := d.str(nm, join(p, "name")); ok {
					names = []string{s}
				}
			}
			pp := d.mountPath(it, p, "path")
			opt := d.optBool(it.get("optional"), join(p, "optional"), false)
			if pp != "" && names != nil {
				out = append(out, MountPoint{Name: names, Path: pp, Optional: opt})
			}
		default:
			d.errf(it, p, "expected a mount point, got %s", it.describe())
		}
	}
	return out
}

func (d *dec) mountPath(n *node, path, key string) string {
	v := n.get(key)
	if v.isNull() {
		d.errf(n, path, "field %q is required", key)
		return ""
	}
	s, ok := d.str(v, join(path, key))
	if !ok {
		return ""
	}
	c, err := CleanMountPath(s)
	if err != nil {
		d.errf(v, join(path, key), "%v", err)
		return ""
	}
	return c
}

func (d *dec) retry(n *node, path string) *Retry {
	if n.isNull() {
		return nil
	}
	if n.kind != nMap {
		b, ok := d.boolean(n, path)
		if !ok || !b {
			return nil
		}
		return &Retry{OnEvents: append([]string(nil), retryEvents...), Duration: DefaultRetryDuration}
	}
	if !d.object(n, path, "on_events", "duration") {
		return nil
	}
	r := &Retry{OnEvents: append([]string(nil), retryEvents...), Duration: DefaultRetryDuration}
	if ev := n.get("on_events"); !ev.isNull() {
		p := join(path, "on_events")
		if ev.kind != nList {
			d.errf(ev, p, "expected a list, got %s", ev.describe())
		} else if len(ev.items) == 0 {
			d.errf(ev, p, "`on_events` cannot be empty")
		} else {
			set := map[string]bool{}
			for i, it := range ev.items {
				if s, ok := d.enum(it, idx(p, i), retryEvents...); ok {
					set[s] = true
				}
			}
			r.OnEvents = nil
			for _, e := range retryEvents {
				if set[e] {
					r.OnEvents = append(r.OnEvents, e)
				}
			}
		}
	}
	if du := n.get("duration"); !du.isNull() {
		if v, ok := d.duration(du, join(path, "duration")); ok {
			if v < 0 {
				d.errf(du, join(path, "duration"), "retry.duration cannot be negative")
			}
			r.Duration = v
		}
	}
	return r
}

var (
	tagKeyRE   = regexp.MustCompile(`^[_\-a-zA-Z0-9]{1,60}$`)
	tagValueRE = regexp.MustCompile(`^[a-zA-Z0-9 .:/=_\-+@]{0,256}$`)
)

func (d *dec) tags(n *node, path string) map[string]string {
	if n.isNull() {
		return nil
	}
	if n.kind != nMap {
		d.errf(n, path, "expected a mapping, got %s", n.describe())
		return nil
	}
	out := map[string]string{}
	for i, k := range n.keys {
		p := join(path, k.str)
		if n.vals[i].kind != nString {
			// dstack's tag validator runs before any coercion.
			d.errf(n.vals[i], p, "invalid tag value: expected a string, got %s", n.vals[i].describe())
			continue
		}
		v := n.vals[i].str
		if !tagKeyRE.MatchString(k.str) {
			d.errf(k, p, "invalid tag key %s: the key must match regex '%s'", k.str, tagKeyRE)
			continue
		}
		if !tagValueRE.MatchString(v) {
			d.errf(n.vals[i], p, "invalid tag value %s: the value must match regex '%s'", v, tagValueRE)
			continue
		}
		out[k.str] = v
	}
	return out
}

func (d *dec) backendList(n *node, path string) []string {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	out := []string{}
	for i, it := range n.items {
		if s, ok := d.enum(it, idx(path, i), backendTypes...); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *dec) backendOptions(n *node, path string) []BackendOptions {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []BackendOptions
	seen := map[string]bool{}
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, "type", "offer_order", "min_reliability", "min_score") {
			continue
		}
		bo := BackendOptions{Type: "vastai"}
		if t := it.get("type"); !t.isNull() {
			if s, ok := d.enum(t, join(p, "type"), "vastai"); ok {
				bo.Type = s
			}
		}
		if v := it.get("offer_order"); !v.isNull() {
			bo.OfferOrder, _ = d.enum(v, join(p, "offer_order"), "score", "price")
		}
		if v := it.get("min_reliability"); !v.isNull() {
			if f, ok := d.number(v, join(p, "min_reliability")); ok {
				if f < 0 || f > 1 {
					d.errf(v, join(p, "min_reliability"), "must be between 0 and 1")
				}
				bo.MinReliability = f64(f)
			}
		}
		if v := it.get("min_score"); !v.isNull() {
			if x, ok := d.integer(v, join(p, "min_score")); ok {
				if x < 0 {
					d.errf(v, join(p, "min_score"), "must be greater than or equal to 0")
				}
				xi := int(x)
				bo.MinScore = &xi
			}
		}
		if seen[bo.Type] {
			d.errf(it, p, "backend_options contains duplicate entry for backend '%s'", bo.Type)
		}
		seen[bo.Type] = true
		out = append(out, bo)
	}
	return out
}

func (d *dec) maxPrice(n *node, path string) *float64 {
	if n.isNull() {
		return nil
	}
	v, ok := d.number(n, path)
	if !ok {
		return nil
	}
	if v <= 0 {
		d.errf(n, path, "must be greater than 0")
		return nil
	}
	return f64(v)
}

func (d *dec) entityRef(n *node, path string) (EntityRef, bool) {
	switch n.kind {
	case nString, nInt, nFloat:
		r, err := ParseEntityRef(n.scalarText())
		if err != nil {
			d.errf(n, path, "%v", err)
			return EntityRef{}, false
		}
		return r, true
	case nMap:
		if !d.object(n, path, "project", "name") {
			return EntityRef{}, false
		}
		nm := n.get("name")
		if nm.isNull() {
			d.errf(n, path, "field \"name\" is required")
			return EntityRef{}, false
		}
		name, ok := d.str(nm, join(path, "name"))
		if !ok {
			return EntityRef{}, false
		}
		return EntityRef{Project: d.optStr(n.get("project"), join(path, "project")), Name: name}, true
	}
	d.errf(n, path, "expected a reference, got %s", n.describe())
	return EntityRef{}, false
}

func (d *dec) profile(n *node, idleDefault int64) Profile {
	p := Profile{
		Backends:          d.backendList(n.get("backends"), "backends"),
		Regions:           d.strList(n.get("regions"), "regions"),
		AvailabilityZones: d.strList(n.get("availability_zones"), "availability_zones"),
		InstanceTypes:     d.strList(n.get("instance_types"), "instance_types"),
		Reservation:       d.optStr(n.get("reservation"), "reservation"),
		SpotPolicy:        "on-demand",
		Retry:             d.retry(n.get("retry"), "retry"),
		MaxDuration:       d.offDuration(n.get("max_duration"), "max_duration", Off),
		StopDuration:      d.offDuration(n.get("stop_duration"), "stop_duration", DefaultStopDuration),
		MaxPrice:          d.maxPrice(n.get("max_price"), "max_price"),
		CreationPolicy:    "reuse-or-create",
		IdleDuration:      d.idleDuration(n.get("idle_duration"), "idle_duration", idleDefault),
		StartupOrder:      "any",
		StopCriteria:      "all-done",
		Tags:              d.tags(n.get("tags"), "tags"),
		BackendOptions:    d.backendOptions(n.get("backend_options"), "backend_options"),
	}
	p.Backends, p.Regions = sortedSet(p.Backends), sortedSet(p.Regions)
	p.AvailabilityZones, p.InstanceTypes = sortedSet(p.AvailabilityZones), sortedSet(p.InstanceTypes)
	if v := n.get("spot_policy"); !v.isNull() {
		if s, ok := d.enum(v, "spot_policy", "spot", "on-demand", "auto"); ok {
			p.SpotPolicy = s
		}
	}
	if v := n.get("creation_policy"); !v.isNull() {
		if s, ok := d.enum(v, "creation_policy", "reuse", "reuse-or-create"); ok {
			p.CreationPolicy = s
		}
	}
	if v := n.get("startup_order"); !v.isNull() {
		if s, ok := d.enum(v, "startup_order", "any", "master-first", "workers-first"); ok {
			p.StartupOrder = s
		}
	}
	if v := n.get("stop_criteria"); !v.isNull() {
		if s, ok := d.enum(v, "stop_criteria", "all-done", "master-done"); ok {
			p.StopCriteria = s
		}
	}
	if v := n.get("utilization_policy"); !v.isNull() && d.object(v, "utilization_policy", "min_gpu_utilization", "time_window") {
		up := &UtilizationPolicy{}
		ok := true
		if m := v.get("min_gpu_utilization"); m.isNull() {
			d.errf(v, "utilization_policy", "field \"min_gpu_utilization\" is required")
			ok = false
		} else if x, good := d.integer(m, "utilization_policy.min_gpu_utilization"); good {
			if x < 0 || x > 100 {
				d.errf(m, "utilization_policy.min_gpu_utilization", "must be between 0 and 100")
			}
			up.MinGPUUtilization = int(x)
		}
		if t := v.get("time_window"); t.isNull() {
			d.errf(v, "utilization_policy", "field \"time_window\" is required")
			ok = false
		} else if x, good := d.duration(t, "utilization_policy.time_window"); good {
			if x < 300 {
				d.errf(t, "utilization_policy.time_window", "minimum time_window is 5m")
			} else if x > 3600 {
				d.errf(t, "utilization_policy.time_window", "maximum time_window is 3600s")
			}
			up.TimeWindow = x
		}
		if ok {
			p.UtilizationPolicy = up
		}
	}
	if v := n.get("schedule"); !v.isNull() && d.object(v, "schedule", "cron") {
		c := v.get("cron")
		var crons []string
		switch {
		case c.isNull():
			d.errf(v, "schedule", "field \"cron\" is required")
		case c.kind == nList:
			crons = d.strList(c, "schedule.cron")
			if len(c.items) == 0 {
				d.errf(c, "schedule.cron", "at least one cron expression must be specified")
			}
			for i, it := range c.items {
				if i < len(crons) {
					if err := validateCron(crons[i]); err != nil {
						d.errf(it, idx("schedule.cron", i), "%v", err)
					}
				}
			}
		default:
			if s, ok := d.str(c, "schedule.cron"); ok {
				if err := validateCron(s); err != nil {
					d.errf(c, "schedule.cron", "%v", err)
				}
				crons = []string{s}
			}
		}
		if len(crons) > 0 {
			p.Schedule = &Schedule{Cron: crons}
		}
	}
	if v := n.get("fleets"); !v.isNull() {
		if v.kind != nList {
			d.errf(v, "fleets", "expected a list, got %s", v.describe())
		} else {
			p.Fleets = []EntityRef{}
			for i, it := range v.items {
				if r, ok := d.entityRef(it, idx("fleets", i)); ok {
					p.Fleets = append(p.Fleets, r)
				}
			}
		}
	}
	if v := n.get("instances"); !v.isNull() {
		p.Instances = d.instances(v, "instances")
	}
	sort.SliceStable(p.Fleets, func(i, j int) bool {
		a, b := p.Fleets[i], p.Fleets[j]
		return a.Project < b.Project || a.Project == b.Project && a.Name < b.Name
	})
	return p
}

// sortedSet sorts and dedupes a list whose order carries no meaning, so
// reordering it never shows up as a change.
func sortedSet(l []string) []string {
	if l == nil {
		return nil
	}
	out := append([]string{}, l...)
	sort.Strings(out)
	w := 0
	for i, s := range out {
		if i == 0 || s != out[w-1] {
			out[w] = s
			w++
		}
	}
	return out[:w]
}

func (d *dec) instances(n *node, path string) []InstanceSelector {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	if len(n.items) == 0 {
		d.errf(n, path, "list should have at least 1 item")
		return nil
	}
	var out []InstanceSelector
	for i, it := range n.items {
		p := idx(path, i)
		switch {
		case it.kind == nString:
			if it.str == "" {
				d.errf(it, p, "instance name cannot be empty")
				continue
			}
			out = append(out, InstanceSelector{Name: it.str})
		case it.kind == nMap && it.has("fleet"):
			if !d.object(it, p, "fleet", "instance") {
				continue
			}
			ref, ok := d.entityRef(it.get("fleet"), join(p, "fleet"))
			in := it.get("instance")
			if in.isNull() {
				d.errf(it, p, "field \"instance\" is required")
				continue
			}
			x, ok2 := d.integer(in, join(p, "instance"))
			if ok2 && x < 0 {
				d.errf(in, join(p, "instance"), "must be greater than or equal to 0")
			}
			if ok && ok2 {
				xi := int(x)
				out = append(out, InstanceSelector{Fleet: &ref, Instance: &xi})
			}
		case it.kind == nMap && it.has("hostname"):
			if d.object(it, p, "hostname") {
				if s, ok := d.str(it.get("hostname"), join(p, "hostname")); ok && s != "" {
					out = append(out, InstanceSelector{Hostname: s})
				}
			}
		case it.kind == nMap:
			if d.object(it, p, "name") {
				nm := it.get("name")
				if nm.isNull() {
					d.errf(it, p, "field \"name\" is required")
					continue
				}
				if s, ok := d.str(nm, join(p, "name")); ok && s != "" {
					out = append(out, InstanceSelector{Name: s})
				}
			}
		default:
			d.errf(it, p, "expected an instance selector, got %s", it.describe())
		}
	}
	return out
}

var pythonVersions = []string{"3.9", "3.10", "3.11", "3.12", "3.13", "3.14"}

func (d *dec) python(n *node, path string) string {
	if n.isNull() {
		return ""
	}
	var s string
	switch n.kind {
	case nFloat:
		s = pyFloat(n.f)
		if s == "3.1" {
			s = "3.10"
		}
	case nString:
		s = n.str
	default:
		d.errf(n, path, "invalid python version %s: must be one of %s", n.scalarText(), quoteList(pythonVersions))
		return ""
	}
	if !contains(pythonVersions, s) {
		d.errf(n, path, "invalid python version %q: must be one of %s", s, quoteList(pythonVersions))
		return ""
	}
	return s
}

func (d *dec) commands(n *node, path string) []string {
	return d.strList(n, path)
}

// runConfig decodes the fields shared by the run kinds.
func (d *dec) runConfig(n *node, kind Kind) RunConfig {
	rc := RunConfig{
		Name:       d.optStr(n.get("name"), "name"),
		Image:      d.optStr(n.get("image"), "image"),
		User:       d.optStr(n.get("user"), "user"),
		Privileged: d.optBool(n.get("privileged"), "privileged", false),
		Entrypoint: d.optStr(n.get("entrypoint"), "entrypoint"),
		WorkingDir: d.optStr(n.get("working_dir"), "working_dir"),
		Python:     d.python(n.get("python"), "python"),
		NVCC:       d.optBool(n.get("nvcc"), "nvcc", false),
		Docker:     d.optBool(n.get("docker"), "docker", false),
		Env:        d.env(n.get("env"), "env"),
		Shell:      d.optStr(n.get("shell"), "shell"),
		Resources:  d.resources(n.get("resources"), "resources"),
		Volumes:    d.volumes(n.get("volumes"), "volumes"),
		Dstack:     d.optBool(n.get("dstack"), "dstack", false),
		Setup:      d.strList(n.get("setup"), "setup"),
		Profile:    d.profile(n, DefaultRunIdleDuration),
	}
	if v := n.get("home_dir"); !v.isNull() {
		d.str(v, "home_dir")
	}
	if v := n.get("single_branch"); !v.isNull() {
		if b, ok := d.boolean(v, "single_branch"); ok {
			rc.SingleBranch = &b
		}
	}
	if v := n.get("python"); !v.isNull() && rc.Image != "" {
		d.errf(v, "python", "`image` and `python` are mutually exclusive fields")
	}
	// dstack only checks a literal `true` here (`docker: 1` slips through).
	if v := n.get("docker"); v != nil && v.kind == nBool && v.b {
		switch {
		case rc.Image != "":
			d.errf(v, "docker", "`image` and `docker` are mutually exclusive fields")
		case rc.Python != "":
			d.errf(v, "docker", "`python` and `docker` are mutually exclusive fields")
		case rc.NVCC:
			d.errf(v, "docker", "`nvcc` and `docker` are mutually exclusive fields")
		}
	}
	if v := n.get("working_dir"); !v.isNull() && rc.WorkingDir != "" && !strings.HasPrefix(rc.WorkingDir, "/") {
		// `dstack apply` rejects it before submitting.
		d.errf(v, "working_dir", "working_dir must be absolute")
	}
	if v := n.get("user"); !v.isNull() {
		if err := validateUnixUser(rc.User); err != nil {
			d.errf(v, "user", "%v", err)
		}
	}
	if v := n.get("shell"); !v.isNull() && rc.Shell != "sh" && rc.Shell != "bash" && !strings.HasPrefix(rc.Shell, "/") {
		d.errf(v, "shell", "the value must be `sh`, `bash`, or an absolute path")
	}
	if v := n.get("priority"); !v.isNull() {
		if x, ok := d.integer(v, "priority"); ok {
			if x < 0 || x > 100 {
				d.errf(v, "priority", "must be between 0 and 100")
			}
			rc.Priority = int(x)
		}
	}
	if v := n.get("registry_auth"); !v.isNull() && d.object(v, "registry_auth", "username", "password") {
		ra := &RegistryAuth{}
		ok := true
		for _, f := range []struct {
			key string
			dst *string
		}{{"username", &ra.Username}, {"password", &ra.Password}} {
			x := v.get(f.key)
			if x.isNull() {
				d.errf(v, "registry_auth", "field %q is required", f.key)
				ok = false
				continue
			}
			*f.dst, _ = d.str(x, join("registry_auth", f.key))
		}
		if ok {
			rc.RegistryAuth = ra
		}
	}
	if v := n.get("repos"); !v.isNull() {
		rc.Repos = d.repos(v, "repos")
	}
	if v := n.get("files"); !v.isNull() {
		rc.Files = d.files(v, "files")
	}
	for i, mp := range rc.Volumes {
		if !validDockerTarget(mp.Path) {
			d.errf(n.get("volumes").items[min(i, len(n.get("volumes").items)-1)], idx("volumes", i), "invalid volume mount path: %s", mp.Path)
		}
	}
	return rc
}

// validDockerTarget mirrors dstack's check of a container mount path
// (already cleaned: absolute, no trailing slash).
func validDockerTarget(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.ContainsRune(p, 0)
}

// validateUnixUser mirrors dstack's `user[:group]` parser: names or ids,
// ids not negative, no empty parts.
func validateUnixUser(u string) error {
	parts := strings.Split(u, ":")
	if len(parts) > 2 {
		return fmt.Errorf("invalid user format: too many parts")
	}
	for i, p := range parts {
		what := [...]string{"user", "group"}[i]
		if p == "" {
			return fmt.Errorf("invalid user format: empty %s name or id", what)
		}
		if id, err := parseInt(p); err == nil && id < 0 {
			return fmt.Errorf("invalid user format: negative %cid %d", what[0], id)
		}
	}
	return nil
}

func (d *dec) repos(n *node, path string) []Repo {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []Repo
	for i, it := range n.items {
		p := idx(path, i)
		var r Repo
		switch it.kind {
		case nString:
			var err error
			r, err = ParseRepo(it.str)
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
		case nMap:
			if !d.object(it, p, "local_path", "url", "branch", "hash", "path", "if_exists") {
				continue
			}
			r = Repo{
				LocalPath: d.optStr(it.get("local_path"), join(p, "local_path")),
				URL:       d.optStr(it.get("url"), join(p, "url")),
				Branch:    d.optStr(it.get("branch"), join(p, "branch")),
				Hash:      d.optStr(it.get("hash"), join(p, "hash")),
				Path:      ".",
				IfExists:  "error",
			}
			if v := it.get("path"); !v.isNull() {
				r.Path, _ = d.str(v, join(p, "path"))
			}
			if v := it.get("if_exists"); !v.isNull() {
				if s, ok := d.enum(v, join(p, "if_exists"), "error", "skip"); ok {
					r.IfExists = s
				}
			}
		default:
			d.errf(it, p, "expected a repo, got %s", it.describe())
			continue
		}
		if r.LocalPath != "" && r.URL != "" {
			d.errf(it, p, "`local_path` and `url` are mutually exclusive")
			continue
		}
		if r.LocalPath == "" && r.URL == "" {
			d.errf(it, p, "either `local_path` or `url` must be specified")
			continue
		}
		if strings.HasPrefix(r.Path, "~") && !(r.Path == "~" || strings.HasPrefix(r.Path, "~/")) {
			d.errf(it, p, "`~username` syntax is not supported")
			continue
		}
		out = append(out, r)
	}
	if len(n.items) > 1 {
		d.errf(n.items[1], path, "a maximum of one repo is currently supported")
	}
	return out
}

func (d *dec) files(n *node, path string) []FileMapping {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []FileMapping
	for i, it := range n.items {
		p := idx(path, i)
		switch it.kind {
		case nString:
			fm, err := ParseFileMapping(it.str)
			if err != nil {
				d.errf(it, p, "%v", err)
				continue
			}
			out = append(out, fm)
		case nMap:
			if !d.object(it, p, "local_path", "path") {
				continue
			}
			lp, pp := it.get("local_path"), it.get("path")
			if lp.isNull() || pp.isNull() {
				d.errf(it, p, "fields \"local_path\" and \"path\" are required")
				continue
			}
			l, ok1 := d.str(lp, join(p, "local_path"))
			q, ok2 := d.str(pp, join(p, "path"))
			if ok1 && ok2 {
				if isWindowsAbs(q) {
					d.errf(pp, join(p, "path"), "path must be a Unix file path: %s", q)
					continue
				}
				out = append(out, FileMapping{LocalPath: l, Path: q})
			}
		default:
			d.errf(it, p, "expected a file mapping, got %s", it.describe())
		}
	}
	return out
}

// requireCommandsOrImage reports a missing `commands`/`image` pair.
func (d *dec) requireCommandsOrImage(n *node, commands []string, image string) {
	if len(commands) == 0 && image == "" {
		d.errf(n, "", "either `commands` or `image` must be set")
	}
}

func (d *dec) task(n *node) *Task {
	t := &Task{RunConfig: d.runConfig(n, KindTask)}
	t.Commands = d.commands(n.get("commands"), "commands")
	t.Ports = d.ports(n.get("ports"), "ports")
	nodesN, groupsN := n.get("nodes"), n.get("groups")
	if !nodesN.isNull() && !groupsN.isNull() {
		d.errf(groupsN, "groups", "`nodes` and `groups` are mutually exclusive")
	}
	t.Nodes = 1
	if !nodesN.isNull() {
		if x, ok := d.integer(nodesN, "nodes"); ok {
			if x < 1 {
				d.errf(nodesN, "nodes", "must be greater than or equal to 1")
			}
			t.Nodes = int(x)
		}
	}
	if !groupsN.isNull() {
		t.Nodes = 0
		t.Groups = d.nodeGroups(groupsN, "groups", t.Image)
		if len(t.Commands) > 0 {
			d.errf(n.get("commands"), "commands", "top-level `commands` is not allowed when `groups` is set; specify `commands` in each node group instead")
		}
		if len(t.Ports) > 0 {
			d.errf(n.get("ports"), "ports", "top-level `ports` is not allowed when `groups` is set; specify `ports` in each node group instead")
		}
		if v := n.get("entrypoint"); !v.isNull() {
			d.errf(v, "entrypoint", "top-level `entrypoint` is not allowed when `groups` is set; specify `commands` in each node group instead")
		}
		for i := range t.Groups {
			inferGPUVendor(&t.Groups[i].Resources.GPU, t.Image, t.Docker)
		}
	} else {
		d.requireCommandsOrImage(n, t.Commands, t.Image)
	}
	inferGPUVendor(&t.Resources.GPU, t.Image, t.Docker)
	if t.Groups == nil {
		d.checkImageCompat(resourcesAt(n, "gpu"), resourcesAt(n, "cpu"), "resources", t.Resources, t.Image, t.Docker)
	} else {
		for i, g := range t.Groups {
			if i < len(groupsN.items) {
				d.checkImageCompat(groupsN.items[i], groupsN.items[i], idx("groups", i), g.Resources, t.Image, t.Docker)
			}
		}
	}
	d.checkEnvGroupsRefs(n.get("env"), t.Env)
	if t.Groups != nil {
		var sizes []int
		for _, g := range t.Groups {
			sizes = append(sizes, g.Nodes)
		}
		for i, it := range groupsN.items {
			if i < len(t.Groups) {
				cmds, paths := commandNodes(it.get("commands"), idx("groups", i)+".commands")
				d.checkGroupsRefs(cmds, paths, "nodes", sizes)
				d.checkCommandsInterpolation(cmds, paths)
			}
		}
	} else {
		cmds, paths := commandNodes(n.get("commands"), "commands")
		d.checkGroupsRefs(cmds, paths, "nodes", []int{t.Nodes})
		d.checkCommandsInterpolation(cmds, paths)
	}
	d.checkEnvInterpolation(n, t.Env)
	return t
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

func (d *dec) nodeGroups(n *node, path, image string) []NodeGroup {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	if len(n.items) == 0 {
		d.errf(n, path, "`groups` cannot be an empty list")
		return nil
	}
	var out []NodeGroup
	seen := map[string]bool{}
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, "name", "nodes", "resources", "commands", "ports") {
			continue
		}
		g := NodeGroup{Name: fmt.Sprint(i), Nodes: 1}
		if v := it.get("name"); !v.isNull() {
			if s, ok := d.str(v, join(p, "name")); ok {
				if !groupNameRE.MatchString(s) {
					d.errf(v, join(p, "name"), "node group name should match regex '^[a-z0-9][a-z0-9-]{0,39}$'")
				}
				g.Name = s
			}
		}
		if v := it.get("nodes"); !v.isNull() {
			if x, ok := d.integer(v, join(p, "nodes")); ok {
				if x < 1 {
					d.errf(v, join(p, "nodes"), "must be greater than or equal to 1")
				}
				g.Nodes = int(x)
			}
		}
		g.Resources = d.resources(it.get("resources"), join(p, "resources"))
		g.Commands = d.commands(it.get("commands"), join(p, "commands"))
		g.Ports = d.ports(it.get("ports"), join(p, "ports"))
		if seen[g.Name] {
			d.errf(it, p, "duplicate node group name %q: each node group must have a unique name", g.Name)
		}
		seen[g.Name] = true
		if len(g.Commands) == 0 && image == "" {
			d.errf(it, p, "node group '%s': either `commands` must be set in the group, or `image` at the task level", g.Name)
		}
		out = append(out, g)
	}
	return out
}

func (d *dec) devEnvironment(n *node) *DevEnvironment {
	e := &DevEnvironment{RunConfig: d.runConfig(n, KindDevEnvironment)}
	e.Ports = d.ports(n.get("ports"), "ports")
	if v := n.get("ide"); !v.isNull() {
		e.IDE, _ = d.enum(v, "ide", "vscode", "cursor", "windsurf", "zed")
	}
	if v := n.get("version"); !v.isNull() {
		e.Version, _ = d.str(v, "version")
		if e.Version != "" && n.get("ide").isNull() {
			d.errf(v, "version", "`version` requires `ide` to be set")
		}
		if e.IDE == "windsurf" && e.Version != "" && !regexp.MustCompile(`^.+@[a-f0-9]+$`).MatchString(e.Version) {
			d.errf(v, "version", "invalid Windsurf version format: `%s`; expected `version@commit`", e.Version)
		}
	}
	e.Init = d.commands(n.get("init"), "init")
	if v := n.get("inactivity_duration"); !v.isNull() {
		x := d.offDuration(v, "inactivity_duration", 0)
		if x > 0 {
			e.InactivityDuration = x
		}
		if x >= 0 && e.Dstack && !(v.kind == nBool && v.b) {
			d.errf(v, "inactivity_duration", "`dstack` is not supported together with `inactivity_duration`")
		}
	}
	if v := n.get("entrypoint"); !v.isNull() {
		d.errf(v, "entrypoint", "entrypoint is not supported for dev-environment")
	}
	inferGPUVendor(&e.Resources.GPU, e.Image, e.Docker)
	d.checkImageCompat(resourcesAt(n, "gpu"), resourcesAt(n, "cpu"), "resources", e.Resources, e.Image, e.Docker)
	d.checkEnvGroupsRefs(n.get("env"), e.Env)
	cmds, paths := commandNodes(n.get("init"), "init")
	d.checkGroupsRefs(cmds, paths, "", nil)
	d.checkEnvInterpolation(n, e.Env)
	return e
}

var scalingWindows = []int64{30, 60, 300}

func (d *dec) scaling(n *node, path string) *Scaling {
	if n.isNull() {
		return nil
	}
	if !d.object(n, path, "metric", "target", "window", "scale_up_delay", "scale_down_delay") {
		return nil
	}
	s := &Scaling{Metric: "rps", Window: DefaultScalingWindow, ScaleUpDelay: DefaultScaleUpDelay, ScaleDownDelay: DefaultScaleDownDelay}
	if v := n.get("metric"); v.isNull() {
		d.errf(n, path, "field \"metric\" is required")
	} else {
		d.enum(v, join(path, "metric"), "rps")
	}
	if v := n.get("target"); v.isNull() {
		d.errf(n, path, "field \"target\" is required")
	} else if f, ok := d.number(v, join(path, "target")); ok {
		if f <= 0 {
			d.errf(v, join(path, "target"), "must be greater than 0")
		}
		s.Target = f
	}
	if v := n.get("window"); !v.isNull() {
		if x, ok := d.duration(v, join(path, "window")); ok {
			if x != 30 && x != 60 && x != 300 {
				d.errf(v, join(path, "window"), "window must be one of: `30s`, `60s`, `300s`")
			}
			s.Window = x
		}
	}
	if v := n.get("scale_up_delay"); !v.isNull() {
		if x, ok := d.duration(v, join(path, "scale_up_delay")); ok {
			s.ScaleUpDelay = x
		}
	}
	if v := n.get("scale_down_delay"); !v.isNull() {
		if x, ok := d.duration(v, join(path, "scale_down_delay")); ok {
			s.ScaleDownDelay = x
		}
	}
	return s
}

func (d *dec) replicaRange(n *node, path string) (Range, bool) {
	r, ok := d.intRange(n, path)
	if !ok {
		return Range{}, false
	}
	if r.Max == nil {
		d.errf(n, path, "the maximum number of replicas is required")
		return Range{}, false
	}
	if r.Min == nil {
		r.Min = f64(0)
	}
	if *r.Min < 0 {
		d.errf(n, path, "the minimum number of replicas must be greater than or equal to 0")
		return Range{}, false
	}
	return r, true
}

var (
	rateLimitPrefixRE = regexp.MustCompile(`^/[^\s\\{}]*$`)
	headerNameRE      = regexp.MustCompile(`^[a-zA-Z0-9-_]+$`)
)

func (d *dec) rateLimits(n *node, path string) []RateLimit {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	var out []RateLimit
	seen := map[string]bool{}
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, "prefix", "key", "rps", "burst") {
			continue
		}
		rl := RateLimit{Prefix: "/", Key: RateLimitKey{Type: "ip_address"}}
		if v := it.get("prefix"); !v.isNull() {
			if s, ok := d.str(v, join(p, "prefix")); ok {
				if !rateLimitPrefixRE.MatchString(s) || len(s) > 4094 {
					d.errf(v, join(p, "prefix"), "invalid prefix %q: must match '^/[^\\s\\\\{}]*$'", s)
				}
				rl.Prefix = s
			}
		}
		if v := it.get("key"); !v.isNull() && d.object(v, join(p, "key"), "type", "header") {
			kp := join(p, "key")
			t := v.get("type")
			if t.isNull() {
				d.errf(v, kp, "field \"type\" is required")
			} else if s, ok := d.enum(t, join(kp, "type"), "ip_address", "header"); ok {
				rl.Key.Type = s
				h := v.get("header")
				if s == "header" {
					if h.isNull() {
						d.errf(v, kp, "field \"header\" is required")
					} else if hs, ok := d.str(h, join(kp, "header")); ok {
						if !headerNameRE.MatchString(hs) || len(hs) > 500 {
							d.errf(h, join(kp, "header"), "invalid header name %q", hs)
						}
						rl.Key.Header = hs
					}
				} else if h != nil {
					d.errf(v.keyNode("header"), join(kp, "header"), "field \"header\" not allowed")
				}
			}
		}
		if v := it.get("rps"); v.isNull() {
			d.errf(it, p, "field \"rps\" is required")
		} else if f, ok := d.number(v, join(p, "rps")); ok {
			if f < 1.0/60 || f > float64((1<<63-1)/60) {
				d.errf(v, join(p, "rps"), "must be between 1/60 and %d", (1<<63-1)/60)
			}
			rl.RPS = f
		}
		if v := it.get("burst"); !v.isNull() {
			if x, ok := d.integer(v, join(p, "burst")); ok {
				if x < 0 {
					d.errf(v, join(p, "burst"), "must be greater than or equal to 0")
				}
				rl.Burst = x
			}
		}
		if seen[rl.Prefix] {
			d.errf(it, p, "prefix %q is used more than once; each rate limit should have a unique path prefix", rl.Prefix)
		}
		seen[rl.Prefix] = true
		out = append(out, rl)
	}
	return out
}

func (d *dec) probes(n *node, path string) []Probe {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	out := []Probe{}
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, "type", "url", "method", "headers", "body", "timeout", "interval", "ready_after", "until_ready") {
			continue
		}
		pr := Probe{Type: "http", URL: "/", Method: "get", Timeout: 10, Interval: 15, ReadyAfter: 1}
		if v := it.get("type"); v.isNull() {
			d.errf(it, p, "field \"type\" is required")
		} else {
			d.enum(v, join(p, "type"), "http")
		}
		if v := it.get("url"); !v.isNull() {
			if s, ok := d.str(v, join(p, "url")); ok {
				switch {
				case !strings.HasPrefix(s, "/"):
					d.errf(v, join(p, "url"), "must start with `/`")
				case len(s) > 2048:
					d.errf(v, join(p, "url"), "cannot be longer than 2048 characters")
				case strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
					d.errf(v, join(p, "url"), "cannot contain non-printable characters")
				}
				pr.URL = s
			}
		}
		if v := it.get("method"); !v.isNull() {
			if s, ok := d.enum(v, join(p, "method"), "get", "post", "put", "delete", "patch", "head"); ok {
				pr.Method = s
			}
		}
		if v := it.get("headers"); !v.isNull() {
			if v.kind != nList {
				d.errf(v, join(p, "headers"), "expected a list, got %s", v.describe())
			} else {
				if len(v.items) > 16 {
					d.errf(v, join(p, "headers"), "at most 16 headers are allowed")
				}
				for j, h := range v.items {
					hp := idx(join(p, "headers"), j)
					if !d.object(h, hp, "name", "value") {
						continue
					}
					nm, vl := h.get("name"), h.get("value")
					if nm.isNull() || vl.isNull() {
						d.errf(h, hp, "fields \"name\" and \"value\" are required")
						continue
					}
					ns, _ := d.str(nm, join(hp, "name"))
					vs, _ := d.str(vl, join(hp, "value"))
					if len(ns) < 1 || len(ns) > 256 {
						d.errf(nm, join(hp, "name"), "length must be between 1 and 256")
					}
					if len(vs) < 1 || len(vs) > 2048 {
						d.errf(vl, join(hp, "value"), "length must be between 1 and 2048")
					}
					pr.Headers = append(pr.Headers, HTTPHeader{Name: ns, Value: vs})
				}
			}
		}
		if v := it.get("body"); !v.isNull() {
			if s, ok := d.str(v, join(p, "body")); ok {
				if len(s) < 1 || len(s) > 2048 {
					d.errf(v, join(p, "body"), "length must be between 1 and 2048")
				}
				pr.Body = s
				// dstack checks an explicit method only (the default is get).
				if m := it.get("method"); !m.isNull() && (pr.Method == "get" || pr.Method == "head") {
					d.errf(v, join(p, "body"), "cannot set request body for the `%s` method", pr.Method)
				}
			}
		}
		if v := it.get("timeout"); !v.isNull() {
			if x, ok := d.duration(v, join(p, "timeout")); ok {
				if x < 1 {
					d.errf(v, join(p, "timeout"), "probe timeout cannot be shorter than 1s")
				} else if x > 300 {
					d.errf(v, join(p, "timeout"), "probe timeout cannot be longer than 300s")
				}
				pr.Timeout = x
			}
		}
		if v := it.get("interval"); !v.isNull() {
			if x, ok := d.duration(v, join(p, "interval")); ok {
				if x < 1 {
					d.errf(v, join(p, "interval"), "probe interval cannot be shorter than 1s")
				}
				pr.Interval = x
			}
		}
		if v := it.get("ready_after"); !v.isNull() {
			if x, ok := d.integer(v, join(p, "ready_after")); ok {
				if x < 1 {
					d.errf(v, join(p, "ready_after"), "must be greater than or equal to 1")
				}
				pr.ReadyAfter = int(x)
			}
		}
		pr.UntilReady = d.optBool(it.get("until_ready"), join(p, "until_ready"), false)
		for _, q := range out {
			if probeEqual(q, pr) {
				d.errf(it, p, "probes must be unique")
			}
		}
		out = append(out, pr)
	}
	if len(out) > 10 {
		d.errf(n, path, "cannot configure more than 10 probes")
	}
	return out
}

func probeEqual(a, b Probe) bool {
	if len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i] != b.Headers[i] {
			return false
		}
	}
	a.Headers, b.Headers = nil, nil
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func (d *dec) model(n *node, path string) *Model {
	if n.isNull() {
		return nil
	}
	if n.kind == nString {
		return &Model{Type: "chat", Name: n.str, Format: "openai", Prefix: "/v1"}
	}
	if n.kind != nMap {
		d.errf(n, path, "expected a model name or mapping, got %s", n.describe())
		return nil
	}
	f := n.get("format")
	if f.isNull() {
		d.errf(n, path, "field \"format\" is required")
		return nil
	}
	format, ok := d.enum(f, join(path, "format"), "openai", "tgi")
	if !ok {
		return nil
	}
	allowed := []string{"type", "name", "format", "prefix"}
	if format == "tgi" {
		allowed = []string{"type", "name", "format", "chat_template", "eos_token"}
	}
	if !d.object(n, path, allowed...) {
		return nil
	}
	m := &Model{Type: "chat", Format: format}
	if v := n.get("type"); !v.isNull() {
		d.enum(v, join(path, "type"), "chat")
	}
	if v := n.get("name"); v.isNull() {
		d.errf(n, path, "field \"name\" is required")
	} else {
		m.Name, _ = d.str(v, join(path, "name"))
	}
	if format == "openai" {
		m.Prefix = "/v1"
		if v := n.get("prefix"); !v.isNull() {
			m.Prefix, _ = d.str(v, join(path, "prefix"))
		}
	} else {
		m.ChatTemplate = d.optStr(n.get("chat_template"), join(path, "chat_template"))
		m.EOSToken = d.optStr(n.get("eos_token"), join(path, "eos_token"))
	}
	return m
}

func (d *dec) service(n *node) *Service {
	s := &Service{RunConfig: d.runConfig(n, KindService), StripPrefix: true, Auth: true, HTTPS: "true"}
	s.Commands = d.commands(n.get("commands"), "commands")
	if v := n.get("port"); v.isNull() {
		d.errf(n, "", "field \"port\" is required")
	} else {
		switch v.kind {
		case nInt, nBool, nFloat:
			if pn, ok := d.portNum(v, "port"); ok {
				lp := 80
				s.Port = PortMapping{LocalPort: &lp, ContainerPort: pn}
			}
		case nString:
			if isDigits(v.str) {
				// pydantic's lax mode reads "8000" as the int 8000.
				if x, err := parseInt(v.str); err == nil && x >= 1 && x <= 65535 {
					lp := 80
					s.Port = PortMapping{LocalPort: &lp, ContainerPort: int(x)}
				} else {
					d.errf(v, "port", "invalid port %s: must be between 1 and 65535", v.str)
				}
			} else if !regexp.MustCompile(`^[0-9]+:[0-9]+$`).MatchString(v.str) {
				d.errf(v, "port", "invalid port %q: expected a port number or \"local:container\"", v.str)
			} else if pm, ok := d.port(v, "port"); ok {
				s.Port = pm
			}
		default:
			if pm, ok := d.port(v, "port"); ok {
				s.Port = pm
			}
		}
	}
	if v := n.get("gateway"); !v.isNull() {
		b, isBool := false, v.kind == nBool
		if isBool {
			b = v.b
		} else if v.kind == nString {
			// pydantic tries bool first (left to right): "true", "no", ...
			switch strings.ToLower(v.str) {
			case "0", "off", "f", "false", "n", "no":
				isBool = true
			case "1", "on", "t", "true", "y", "yes":
				b, isBool = true, true
			}
		}
		switch {
		case isBool:
			s.Gateway = &GatewayRef{Enabled: b}
		default:
			if r, ok := d.entityRef(v, "gateway"); ok {
				s.Gateway = &GatewayRef{Enabled: true, Ref: &r}
			}
		}
	}
	s.StripPrefix = d.optBool(n.get("strip_prefix"), "strip_prefix", true)
	s.Auth = d.optBool(n.get("auth"), "auth", true)
	if v := n.get("https"); !v.isNull() {
		if v.kind == nString && v.str == "auto" {
			s.HTTPS = "auto"
		} else if b, ok := d.boolean(v, "https"); ok {
			s.HTTPS = fmt.Sprint(b)
		}
	}
	s.Model = d.model(n.get("model"), "model")
	s.Scaling = d.scaling(n.get("scaling"), "scaling")
	s.RateLimits = d.rateLimits(n.get("rate_limits"), "rate_limits")

	replicasN, groupsN := n.get("replicas"), n.get("groups")
	if groupsN.isNull() && replicasN != nil && replicasN.kind == nList {
		groupsN, replicasN = replicasN, nil
	}
	if !groupsN.isNull() && !replicasN.isNull() {
		d.errf(groupsN, "groups", "`replicas` and `groups` are mutually exclusive")
	}
	s.Replicas = Range{Min: f64(1), Max: f64(1)}
	if !replicasN.isNull() {
		if r, ok := d.replicaRange(replicasN, "replicas"); ok {
			s.Replicas = r
			if !r.Exact() && s.Scaling == nil {
				d.errf(replicasN, "replicas", "when you set `replicas` to a range, ensure to specify `scaling`")
			}
		}
	}
	if r := s.Replicas; r.Exact() && s.Scaling != nil && groupsN.isNull() && !replicasN.isNull() {
		d.errf(n.get("scaling"), "scaling", "to use `scaling`, `replicas` must be set to a range")
	}
	if !groupsN.isNull() {
		s.Groups = d.replicaGroups(groupsN, "replicas", s, n)
		s.Replicas = Range{}
		if s.Scaling != nil {
			d.errf(n.get("scaling"), "scaling", "top-level `scaling` is not allowed when `groups` is set; specify `scaling` in each replica group instead")
		}
		if len(s.Commands) > 0 {
			d.errf(n.get("commands"), "commands", "top-level `commands` is not allowed when `groups` is set; specify `commands` in each replica group instead")
		}
	} else {
		d.requireCommandsOrImage(n, s.Commands, s.Image)
	}
	if v := n.get("probes"); v.isNull() {
		s.Probes = []Probe{}
		if s.Model != nil && s.Model.Format == "openai" {
			s.Probes = []Probe{{Type: "http", URL: strings.TrimRight(s.Model.Prefix, "/") + "/chat/completions", Method: "post",
				Headers: []HTTPHeader{{Name: "Content-Type", Value: "application/json"}},
				Body:    fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`, s.Model.Name),
				Timeout: 30, Interval: 15, ReadyAfter: 1}}
		}
	} else {
		s.Probes = d.probes(v, "probes")
	}
	if s.Schedule != nil {
		zero := true
		if s.Groups == nil {
			zero = *s.Replicas.Min == 0
		} else {
			for _, g := range s.Groups {
				if g.Replicas.Min == nil || *g.Replicas.Min != 0 {
					zero = false
				}
			}
		}
		if zero {
			d.errf(n.get("schedule"), "schedule", "scheduled services with autoscaling to zero are not supported")
		}
	}
	inferGPUVendor(&s.Resources.GPU, s.Image, s.Docker)
	for i := range s.Groups {
		g := &s.Groups[i]
		img, dock := s.Image, s.Docker
		if g.Image != "" {
			img = g.Image
		}
		if g.Docker != nil {
			dock = *g.Docker
		}
		inferGPUVendor(&g.Resources.GPU, img, dock)
		if groupsN != nil && groupsN.kind == nList && i < len(groupsN.items) {
			key := "groups"
			if n.get("groups").isNull() {
				key = "replicas"
			}
			d.checkImageCompat(groupsN.items[i], groupsN.items[i], idx(key, i), g.Resources, img, dock)
		}
	}
	if s.Groups == nil {
		d.checkImageCompat(resourcesAt(n, "gpu"), resourcesAt(n, "cpu"), "resources", s.Resources, s.Image, s.Docker)
	}
	d.checkEnvGroupsRefs(n.get("env"), s.Env)
	var sizes []int
	if s.Groups != nil {
		for _, g := range s.Groups {
			m := 0
			if g.Replicas.Min != nil {
				m = int(*g.Replicas.Min)
			}
			sizes = append(sizes, m)
		}
	} else if s.Replicas.Min != nil {
		sizes = []int{int(*s.Replicas.Min)}
	}
	cmds, paths := commandNodes(n.get("commands"), "commands")
	d.checkGroupsRefs(cmds, paths, "replicas", sizes)
	d.checkCommandsInterpolation(cmds, paths)
	if groupsN != nil && groupsN.kind == nList {
		key := "groups"
		if n.get("groups").isNull() {
			key = "replicas"
		}
		for i, it := range groupsN.items {
			if it.kind == nMap {
				cmds, paths := commandNodes(it.get("commands"), idx(key, i)+".commands")
				d.checkGroupsRefs(cmds, paths, "replicas", sizes)
				d.checkCommandsInterpolation(cmds, paths)
			}
		}
	}
	d.checkEnvInterpolation(n, s.Env)
	return s
}

func (d *dec) replicaGroups(n *node, path string, s *Service, top *node) []ReplicaGroup {
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	if len(n.items) == 0 {
		d.errf(n, path, "`groups` cannot be an empty list")
		return nil
	}
	var out []ReplicaGroup
	seen := map[string]bool{}
	routers := 0
	for i, it := range n.items {
		p := idx(path, i)
		if !d.object(it, p, "name", "replicas", "count", "scaling", "resources", "spot_policy", "reservation",
			"commands", "image", "python", "nvcc", "docker", "privileged", "router") {
			continue
		}
		g := ReplicaGroup{Name: fmt.Sprint(i)}
		if v := it.get("name"); !v.isNull() {
			if s, ok := d.str(v, join(p, "name")); ok {
				if !groupNameRE.MatchString(s) {
					d.errf(v, join(p, "name"), "resource name should match regex '^[a-z0-9][a-z0-9-]{0,39}$'")
				}
				g.Name = s
			}
		}
		rn, rkey := it.get("replicas"), "replicas"
		if !it.has("replicas") {
			rn, rkey = it.get("count"), "count"
		}
		if rn.isNull() {
			d.errf(it, p, "field \"replicas\" is required")
		} else if r, ok := d.replicaRange(rn, join(p, rkey)); ok {
			g.Replicas = r
		}
		g.Scaling = d.scaling(it.get("scaling"), join(p, "scaling"))
		if g.Replicas.Max != nil {
			if !g.Replicas.Exact() && g.Scaling == nil {
				d.errf(rn, join(p, rkey), "when you set `replicas` to a range, ensure to specify `scaling`")
			}
			if g.Replicas.Exact() && g.Scaling != nil {
				d.errf(it.get("scaling"), join(p, "scaling"), "to use `scaling`, `replicas` must be set to a range")
			}
		}
		g.Resources = d.resources(it.get("resources"), join(p, "resources"))
		if v := it.get("spot_policy"); !v.isNull() {
			g.SpotPolicy, _ = d.enum(v, join(p, "spot_policy"), "spot", "on-demand", "auto")
		}
		g.Reservation = d.optStr(it.get("reservation"), join(p, "reservation"))
		g.Commands = d.commands(it.get("commands"), join(p, "commands"))
		g.Image = d.optStr(it.get("image"), join(p, "image"))
		g.Python = d.python(it.get("python"), join(p, "python"))
		optB := func(key string) *bool {
			v := it.get(key)
			if v.isNull() {
				return nil
			}
			b, ok := d.boolean(v, join(p, key))
			if !ok {
				return nil
			}
			return &b
		}
		g.NVCC, g.Docker, g.Privileged = optB("nvcc"), optB("docker"), optB("privileged")
		if g.Python != "" && g.Image != "" {
			d.errf(it.get("python"), join(p, "python"), "`image` and `python` are mutually exclusive within a replica group")
		}
		if g.Docker != nil && *g.Docker {
			switch {
			case g.Image != "":
				d.errf(it.get("docker"), join(p, "docker"), "`image` and `docker` are mutually exclusive within a replica group")
			case g.Python != "":
				d.errf(it.get("docker"), join(p, "docker"), "`python` and `docker` are mutually exclusive within a replica group")
			case g.NVCC != nil && *g.NVCC:
				d.errf(it.get("docker"), join(p, "docker"), "`nvcc` and `docker` are mutually exclusive within a replica group")
			}
			if g.Privileged != nil && !*g.Privileged {
				d.errf(it.get("privileged"), join(p, "privileged"), "`privileged: false` is incompatible with `docker: true` within a replica group")
			}
		}
		if v := it.get("router"); !v.isNull() && d.object(v, join(p, "router"), "type") {
			rt := &Router{Type: "sglang"}
			if t := v.get("type"); !t.isNull() {
				if s, ok := d.enum(t, join(join(p, "router"), "type"), "sglang", "dynamo"); ok {
					rt.Type = s
				}
			}
			g.Router = rt
			routers++
			if routers > 1 {
				d.errf(v, join(p, "router"), "at most one replica group may specify `router`")
			} else if !g.Replicas.Exact() || *g.Replicas.Min != 1 {
				d.errf(v, join(p, "router"), "for now replica group with `router` must have `replicas: 1`")
			}
		}
		if seen[g.Name] {
			d.errf(it, p, "duplicate replica group name %q: each replica group must have a unique name", g.Name)
		}
		seen[g.Name] = true
		if len(g.Commands) == 0 && g.Image == "" && s.Image == "" {
			d.errf(it, p, "replica group '%s': either `commands` or `image` must be set in the group, or `image` at the service level", g.Name)
		}
		// Fields set at both the service and the group level.
		for _, c := range []struct {
			field   string
			service bool
			group   bool
		}{
			{"image", s.Image != "", g.Image != ""},
			{"docker", s.Docker, g.Docker != nil},
			{"privileged", s.Privileged, g.Privileged != nil},
			{"python", s.Python != "", g.Python != ""},
			{"nvcc", s.NVCC, g.NVCC != nil},
			{"spot_policy", !top.get("spot_policy").isNull(), g.SpotPolicy != ""},
			{"reservation", s.Reservation != "", g.Reservation != ""},
		} {
			if c.service && c.group {
				d.errf(it.keyNode(c.field), join(p, c.field), "`%s` is set at both the service level and in replica group '%s'; set it in one place only", c.field, g.Name)
			}
		}
		for _, c := range []struct {
			sf, gf string
			s, g   bool
		}{
			{"image", "docker", s.Image != "", g.Docker != nil},
			{"image", "python", s.Image != "", g.Python != ""},
			{"image", "nvcc", s.Image != "", g.NVCC != nil},
			{"docker", "image", s.Docker, g.Image != ""},
			{"docker", "python", s.Docker, g.Python != ""},
			{"docker", "nvcc", s.Docker, g.NVCC != nil},
			{"python", "image", s.Python != "", g.Image != ""},
			{"python", "docker", s.Python != "", g.Docker != nil},
			{"nvcc", "image", s.NVCC, g.Image != ""},
			{"nvcc", "docker", s.NVCC, g.Docker != nil},
		} {
			if c.s && c.g {
				d.errf(it.keyNode(c.gf), join(p, c.gf), "service-level `%s` conflicts with group-level `%s` in replica group '%s'", c.sf, c.gf, g.Name)
			}
		}
		out = append(out, g)
	}
	return out
}

func (d *dec) fleet(n *node) *Fleet {
	f := &Fleet{
		Name:              d.optStr(n.get("name"), "name"),
		Placement:         "any",
		Blocks:            1,
		Reservation:       d.optStr(n.get("reservation"), "reservation"),
		Backends:          d.backendList(n.get("backends"), "backends"),
		Regions:           d.strList(n.get("regions"), "regions"),
		AvailabilityZones: d.strList(n.get("availability_zones"), "availability_zones"),
		InstanceTypes:     d.strList(n.get("instance_types"), "instance_types"),
		SpotPolicy:        "on-demand",
		Retry:             d.retry(n.get("retry"), "retry"),
		MaxPrice:          d.maxPrice(n.get("max_price"), "max_price"),
		IdleDuration:      d.idleDuration(n.get("idle_duration"), "idle_duration", DefaultFleetIdleDuration),
		Tags:              d.tags(n.get("tags"), "tags"),
		BackendOptions:    d.backendOptions(n.get("backend_options"), "backend_options"),
		Env:               d.env(n.get("env"), "env"),
	}
	f.Backends, f.Regions = sortedSet(f.Backends), sortedSet(f.Regions)
	f.AvailabilityZones, f.InstanceTypes = sortedSet(f.AvailabilityZones), sortedSet(f.InstanceTypes)
	if v := n.get("placement"); !v.isNull() {
		f.Placement, _ = d.enum(v, "placement", "any", "cluster")
	}
	if v := n.get("blocks"); v != nil {
		f.Blocks = d.blocks(v, "blocks", 1)
	}
	if v := n.get("spot_policy"); !v.isNull() {
		f.SpotPolicy, _ = d.enum(v, "spot_policy", "spot", "on-demand", "auto")
	}
	if v := n.get("resources"); v != nil {
		r := d.resources(v, "resources")
		f.Resources = &r
	}
	if v := n.get("nodes"); !v.isNull() {
		f.Nodes = d.nodes(v, "nodes")
	}
	if v := n.get("ssh_config"); !v.isNull() {
		f.SSHConfig = d.sshConfig(v, "ssh_config")
	}
	if f.SSHConfig == nil && f.Resources == nil {
		r := d.resources(nil, "resources")
		f.Resources = &r
	}
	if n.get("nodes").isNull() && n.get("ssh_config").isNull() {
		d.errf(n, "", "either `nodes` or `ssh_config` must be set")
	}
	if !n.get("ssh_config").isNull() && !n.get("nodes").isNull() {
		d.errf(n.get("nodes"), "nodes", "`nodes` and `ssh_config` are mutually exclusive")
	} else if !n.get("ssh_config").isNull() {
		// An SSH fleet does not support the backend fleet fields.
		for _, k := range []string{"reservation", "resources", "backends", "regions", "availability_zones",
			"instance_types", "spot_policy", "retry", "max_price", "idle_duration", "tags", "backend_options"} {
			if v := n.get(k); !v.isNull() {
				d.errf(n.keyNode(k), k, "SSH fleet configuration does not support `%s`", k)
			}
		}
		if f.SSHConfig != nil {
			d.checkSSHHosts(n.get("ssh_config"), f.SSHConfig)
		}
	} else if !n.get("nodes").isNull() {
		if v := n.get("env"); v != nil && len(f.Env) > 0 {
			d.errf(n.keyNode("env"), "env", "backend fleet configuration does not support `env`")
		}
	}
	return f
}

// checkSSHHosts applies dstack's server-side SSH fleet rules: every host
// needs a user and a key, internal_ip is set on all hosts or none and
// excludes network.
func (d *dec) checkSSHHosts(n *node, c *SSHConfig) {
	hostsN := n.get("hosts")
	withIP := 0
	for i, h := range c.Hosts {
		hn := hostsN.items[min(i, len(hostsN.items)-1)]
		p := idx("ssh_config.hosts", i)
		hasKey := c.IdentityFile != "" || !n.get("ssh_key").isNull() || h.IdentityFile != "" || !hn.get("ssh_key").isNull()
		if !hasKey {
			d.errf(hn, p, "no ssh key specified for host %s: set `identity_file`", h.Hostname)
		}
		if c.User == "" && h.User == "" {
			d.errf(hn, p, "no ssh user specified for host %s: set `user`", h.Hostname)
		}
		if h.InternalIP != "" {
			withIP++
		}
	}
	// Push the fleet-wide defaults down so each host is complete.
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.User == "" {
			h.User = c.User
		}
		if h.Port == 0 {
			h.Port = c.Port
		}
		if h.IdentityFile == "" {
			h.IdentityFile = c.IdentityFile
		}
		if h.ProxyJump == nil && c.ProxyJump != nil {
			pj := *c.ProxyJump
			h.ProxyJump = &pj
		}
	}
	if withIP != 0 && withIP != len(c.Hosts) {
		d.errf(hostsN, "ssh_config.hosts", "internal_ip must be specified for all hosts")
	}
	if withIP > 0 && c.Network != "" {
		d.errf(n.get("network"), "ssh_config.network", "internal_ip is mutually exclusive with network")
	}
}

func (d *dec) blocks(n *node, path string, def int) int {
	if n.isNull() {
		d.errf(n, path, "expected a positive integer or \"auto\", got null")
		return def
	}
	if n.kind == nString && n.str == "auto" {
		return 0
	}
	x, ok := d.integer(n, path)
	if !ok {
		return def
	}
	if x < 1 {
		d.errf(n, path, "must be greater than or equal to 1 or \"auto\"")
		return def
	}
	return int(x)
}

func (d *dec) nodes(n *node, path string) *Nodes {
	var minN, targetN, maxN *node
	nd := &Nodes{}
	switch n.kind {
	case nInt, nBool:
		x, ok := d.integer(n, path)
		if !ok {
			return nil
		}
		if x < 0 {
			d.errf(n, path, "min cannot be negative")
			return nil
		}
		v := int(x)
		return &Nodes{Min: v, Target: v, Max: &v}
	case nString:
		// Unlike other ranges, dstack reads ".." here as 0 and unbounded.
		lo, hi, isRange, err := splitRange(n.str)
		if !isRange {
			lo, hi = n.str, n.str
			if strings.TrimSpace(n.str) == "" {
				d.errf(n, path, "invalid integer %q", n.str)
				return nil
			}
		}
		if err != nil {
			d.errf(n, path, "%v", err)
			return nil
		}
		if lo != "" {
			x, err := parseInt(lo)
			if err != nil {
				d.errf(n, path, "%v", err)
				return nil
			}
			nd.Min = int(x)
		}
		nd.Target = nd.Min
		if hi != "" {
			x, err := parseInt(hi)
			if err != nil {
				d.errf(n, path, "%v", err)
				return nil
			}
			m := int(x)
			nd.Max = &m
		}
	case nMap:
		if !d.object(n, path, "min", "target", "max") {
			return nil
		}
		minN, targetN, maxN = n.get("min"), n.get("target"), n.get("max")
		if !minN.isNull() {
			x, ok := d.integer(minN, join(path, "min"))
			if !ok {
				return nil
			}
			nd.Min = int(x)
		}
		nd.Target = nd.Min
		if !targetN.isNull() {
			x, ok := d.integer(targetN, join(path, "target"))
			if !ok {
				return nil
			}
			nd.Target = int(x)
		}
		if !maxN.isNull() {
			x, ok := d.integer(maxN, join(path, "max"))
			if !ok {
				return nil
			}
			m := int(x)
			nd.Max = &m
		}
	default:
		d.errf(n, path, "expected a number, a range or a mapping, got %s", n.describe())
		return nil
	}
	switch {
	case nd.Min < 0:
		d.errf(n, path, "min cannot be negative")
	case nd.Target < nd.Min:
		d.errf(n, path, "target must not be be less than min")
	case nd.Max != nil && *nd.Max < nd.Min:
		d.errf(n, path, "max must not be less than min")
	case nd.Max != nil && *nd.Max < nd.Target:
		d.errf(n, path, "max must not be less than target")
	default:
		return nd
	}
	return nil
}

func (d *dec) sshProxy(n *node, path string) *SSHProxy {
	if n.isNull() {
		return nil
	}
	if !d.object(n, path, "hostname", "port", "user", "identity_file", "ssh_key") {
		return nil
	}
	p := &SSHProxy{}
	for _, req := range []string{"hostname", "user", "identity_file"} {
		if n.get(req).isNull() {
			d.errf(n, path, "field %q is required", req)
		}
	}
	p.Hostname = d.optStr(n.get("hostname"), join(path, "hostname"))
	p.User = d.optStr(n.get("user"), join(path, "user"))
	p.IdentityFile = d.optStr(n.get("identity_file"), join(path, "identity_file"))
	if v := n.get("port"); !v.isNull() {
		if x, ok := d.integer(v, join(path, "port")); ok {
			p.Port = int(x)
		}
	}
	return p
}

func (d *dec) sshConfig(n *node, path string) *SSHConfig {
	if !d.object(n, path, "user", "port", "identity_file", "ssh_key", "proxy_jump", "hosts", "network") {
		return nil
	}
	c := &SSHConfig{
		User:         d.optStr(n.get("user"), join(path, "user")),
		IdentityFile: d.optStr(n.get("identity_file"), join(path, "identity_file")),
		ProxyJump:    d.sshProxy(n.get("proxy_jump"), join(path, "proxy_jump")),
		Hosts:        []SSHHost{},
	}
	if v := n.get("port"); !v.isNull() {
		if x, ok := d.integer(v, join(path, "port")); ok {
			c.Port = int(x)
		}
	}
	if v := n.get("network"); !v.isNull() {
		if s, ok := d.str(v, join(path, "network")); ok {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				if a, err2 := netip.ParseAddr(s); err2 == nil {
					pfx = netip.PrefixFrom(a, a.BitLen())
					err = nil
				}
			}
			switch {
			case err != nil:
				d.errf(v, join(path, "network"), "failed to parse network: %s", s)
			case !isPrivate(pfx.Addr()):
				d.errf(v, join(path, "network"), "public network is specified when private network is required")
			}
			c.Network = s
		}
	}
	hosts := n.get("hosts")
	if hosts.isNull() {
		d.errf(n, path, "field \"hosts\" is required")
		return c
	}
	if hosts.kind != nList {
		d.errf(hosts, join(path, "hosts"), "expected a list, got %s", hosts.describe())
		return c
	}
	for i, h := range hosts.items {
		p := idx(join(path, "hosts"), i)
		switch h.kind {
		case nString, nInt, nFloat:
			c.Hosts = append(c.Hosts, SSHHost{Hostname: h.scalarText()})
		case nMap:
			if !d.object(h, p, "hostname", "port", "user", "identity_file", "proxy_jump", "internal_ip", "ssh_key", "blocks") {
				continue
			}
			hn := h.get("hostname")
			if hn.isNull() {
				d.errf(h, p, "field \"hostname\" is required")
				continue
			}
			sh := SSHHost{
				User:         d.optStr(h.get("user"), join(p, "user")),
				IdentityFile: d.optStr(h.get("identity_file"), join(p, "identity_file")),
				ProxyJump:    d.sshProxy(h.get("proxy_jump"), join(p, "proxy_jump")),
			}
			sh.Hostname, _ = d.str(hn, join(p, "hostname"))
			if v := h.get("port"); !v.isNull() {
				if x, ok := d.integer(v, join(p, "port")); ok {
					sh.Port = int(x)
				}
			}
			if v := h.get("internal_ip"); !v.isNull() {
				if s, ok := d.str(v, join(p, "internal_ip")); ok {
					a, err := netip.ParseAddr(s)
					switch {
					case err != nil:
						d.errf(v, join(p, "internal_ip"), "invalid IP address")
					case !isPrivate(a):
						d.errf(v, join(p, "internal_ip"), "IP address is not private")
					}
					sh.InternalIP = s
				}
			}
			if v := h.get("blocks"); !v.isNull() {
				b := d.blocks(v, join(p, "blocks"), 1)
				sh.Blocks = &b
			}
			c.Hosts = append(c.Hosts, sh)
		default:
			d.errf(h, p, "expected a hostname or a mapping, got %s", h.describe())
		}
	}
	return c
}

func isPrivate(a netip.Addr) bool {
	return a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) == false && false ||
		netip.MustParsePrefix("192.0.0.0/24").Contains(a) || netip.MustParsePrefix("198.18.0.0/15").Contains(a) ||
		netip.MustParsePrefix("240.0.0.0/4").Contains(a) || netip.MustParsePrefix("192.0.2.0/24").Contains(a) ||
		netip.MustParsePrefix("198.51.100.0/24").Contains(a) || netip.MustParsePrefix("203.0.113.0/24").Contains(a)
}

var volumeBackends = []string{"aws", "gcp", "runpod", "kubernetes"}

func (d *dec) volume(n *node) *Volume {
	v := &Volume{AutoCleanupDuration: Off}
	bn := n.get("backend")
	if bn.isNull() {
		d.errf(n, "", "field \"backend\" is required")
		return nil
	}
	backend, ok := d.enum(bn, "backend", volumeBackends...)
	if !ok {
		return nil
	}
	v.Backend = backend
	common := []string{"type", "backend", "name", "size", "auto_cleanup_duration", "tags", "hoist"}
	var allowed []string
	switch backend {
	case "aws", "gcp":
		allowed = concat(common, []string{"region", "availability_zone", "volume_id"})
	case "runpod":
		allowed = concat(common, []string{"region", "volume_id", "availability_zone"})
	case "kubernetes":
		allowed = concat(common, []string{"region", "claim_name", "storage_class_name", "access_modes", "read_only"})
	}
	if !d.object(n, "", allowed...) {
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
	case "aws", "gcp", "runpod":
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

func (d *dec) gateway(n *node) *Gateway {
	g := &Gateway{PublicIP: true, Replicas: 1, Certificate: &Certificate{Type: "lets-encrypt"}}
	g.Name = d.optStr(n.get("name"), "name")
	g.Default = d.optBool(n.get("default"), "default", false)
	if v := n.get("backend"); v.isNull() {
		d.errf(n, "", "field \"backend\" is required")
	} else {
		g.Backend, _ = d.enum(v, "backend", backendTypes...)
	}
	if v := n.get("region"); v.isNull() {
		d.errf(n, "", "field \"region\" is required")
	} else {
		g.Region, _ = d.str(v, "region")
	}
	if v := n.get("instance_type"); !v.isNull() {
		g.InstanceType, _ = d.str(v, "instance_type")
		if g.InstanceType == "" {
			d.errf(v, "instance_type", "string should have at least 1 character")
		}
	}
	g.Domain = d.optStr(n.get("domain"), "domain")
	if v := n.get("public_ip"); !v.isNull() {
		g.PublicIP, _ = d.boolean(v, "public_ip")
	}
	if n.has("certificate") {
		c := n.get("certificate")
		if c.isNull() {
			g.Certificate = nil
		} else if d.object(c, "certificate", "type", "arn") {
			t := c.get("type")
			if t.isNull() {
				d.errf(c, "certificate", "field \"type\" is required")
			} else if s, ok := d.enum(t, "certificate.type", "lets-encrypt", "acm"); ok {
				g.Certificate = &Certificate{Type: s}
				if s == "acm" {
					if a := c.get("arn"); a.isNull() {
						d.errf(c, "certificate", "field \"arn\" is required")
					} else {
						g.Certificate.ARN, _ = d.str(a, "certificate.arn")
					}
				} else if c.has("arn") {
					d.errf(c.keyNode("arn"), "certificate.arn", "field \"arn\" not allowed")
				}
			}
		}
	}
	if v := n.get("replicas"); !v.isNull() {
		if x, ok := d.integer(v, "replicas"); ok {
			if x < 1 {
				d.errf(v, "replicas", "must be greater than or equal to 1")
			}
			g.Replicas = int(x)
		}
	}
	g.Tags = d.tags(n.get("tags"), "tags")
	g.Hoist = d.hoistOptions(n.get("hoist"))
	d.checkGateway(n, g)
	if v := n.get("router"); !v.isNull() && d.object(v, "router", "type", "policy", "pd_disaggregation") {
		r := &GatewayRouter{Type: "sglang", Policy: "cache_aware"}
		if t := v.get("type"); !t.isNull() {
			d.enum(t, "router.type", "sglang")
		}
		if p := v.get("policy"); !p.isNull() {
			if s, ok := d.enum(p, "router.policy", "random", "round_robin", "cache_aware", "power_of_two"); ok {
				r.Policy = s
			}
		}
		r.PDDisaggregation = d.optBool(v.get("pd_disaggregation"), "router.pd_disaggregation", false)
		g.Router = r
	}
	return g
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// gatewayDomainVarRE matches `${{ ... }}` references; only
// run.project_name can be interpolated into a gateway domain.
var gatewayDomainVarRE = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)

// checkGateway applies dstack's server-side gateway rules.
func (d *dec) checkGateway(n *node, g *Gateway) {
	at := func(key string) *node {
		if v := n.get(key); v != nil {
			return v
		}
		return n
	}
	if g.Backend != "" && !contains([]string{"aws", "azure", "gcp", "kubernetes"}, g.Backend) {
		d.errf(at("backend"), "backend", "gateways are not supported for %s backend; available backends with gateway support: aws, azure, gcp, kubernetes", g.Backend)
	}
	if !g.PublicIP && g.Backend != "" && g.Backend != "aws" && g.Backend != "gcp" {
		d.errf(at("public_ip"), "public_ip", "private gateways are not supported for %s backend; available backends with private gateway support: aws, gcp", g.Backend)
	}
	if g.Replicas > 3 {
		d.errf(at("replicas"), "replicas", "cannot provision %d gateway replicas: at most 3 are allowed", g.Replicas)
	}
	for _, m := range gatewayDomainVarRE.FindAllStringSubmatchIndex(g.Domain, -1) {
		if m[0] > 0 && g.Domain[m[0]-1] == '$' {
			continue
		}
		if name := g.Domain[m[2]:m[3]]; name != "run.project_name" {
			d.errf(at("domain"), "domain", "cannot interpolate gateway domain name: unknown variable %q", name)
		}
	}
	if c := g.Certificate; c != nil {
		switch {
		case c.Type == "lets-encrypt" && !g.PublicIP:
			d.errf(at("certificate"), "certificate", "lets-encrypt certificate type is not supported for private gateways")
		case c.Type == "acm" && g.Backend != "aws":
			d.errf(at("certificate"), "certificate", "acm certificate type is supported for aws backend only")
		case c.Type == "lets-encrypt" && g.Replicas > 1:
			d.errf(at("certificate"), "certificate", "the `lets-encrypt` certificate type is not supported for gateways with `replicas` greater than 1; set `certificate: null` or use `acm` on aws")
		}
	}
}

// hoistOptions decodes the `hoist:` block, hoist's own extension to a
// volume or gateway spec (dstack has no such field): `prune: true` lets
// hoist delete the resource when its spec leaves Git, without asking.
func (d *dec) hoistOptions(n *node) *HoistOptions {
	if n.isNull() || !d.object(n, "hoist", "prune") {
		return nil
	}
	o := &HoistOptions{Prune: d.optBool(n.get("prune"), "hoist.prune", false)}
	if !o.Prune {
		return nil
	}
	return o
}
