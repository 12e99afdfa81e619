package schema

import (
	"regexp"
	"sort"
)

func (d *dec) retry(n *node, path string) *Retry {
	if n.isNull() {
		return nil
	}
	if n.kind != nMap {
		b, ok := d.boolean(n, path)
		if !ok || !b {
			return nil
		}
		return &Retry{OnEvents: append([]string(nil), valuesAt("#RetryEvent")...), Duration: DefaultRetryDuration}
	}
	if !d.object(n, path, fieldsAt("#Retry")...) {
		return nil
	}
	r := &Retry{OnEvents: append([]string(nil), valuesAt("#RetryEvent")...), Duration: DefaultRetryDuration}
	if ev := n.get("on_events"); !ev.isNull() {
		p := join(path, "on_events")
		if ev.kind != nList {
			d.errf(ev, p, "expected a list, got %s", ev.describe())
		} else if len(ev.items) == 0 {
			d.errf(ev, p, "`on_events` cannot be empty")
		} else {
			set := map[string]bool{}
			for i, it := range ev.items {
				if s, ok := d.enum(it, idx(p, i), valuesAt("#RetryEvent")...); ok {
					set[s] = true
				}
			}
			r.OnEvents = nil
			for _, e := range valuesAt("#RetryEvent") {
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
		if s, ok := d.enum(it, idx(path, i), valuesAt("#Backend")...); ok {
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
		if !d.object(it, p, fieldsAt("#BackendOptions")...) {
			continue
		}
		bo := BackendOptions{Type: "vastai"}
		if t := it.get("type"); !t.isNull() {
			if s, ok := d.enum(t, join(p, "type"), valuesAt("#BackendOptions.type")...); ok {
				bo.Type = s
			}
		}
		if v := it.get("offer_order"); !v.isNull() {
			bo.OfferOrder, _ = d.enum(v, join(p, "offer_order"), valuesAt("#BackendOptions.offer_order")...)
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
		if !d.object(n, path, fieldsAt("#EntityRef")...) {
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
		if s, ok := d.enum(v, "spot_policy", valuesAt("#SpotPolicy")...); ok {
			p.SpotPolicy = s
		}
	}
	if v := n.get("creation_policy"); !v.isNull() {
		if s, ok := d.enum(v, "creation_policy", valuesAt("#Profile.creation_policy")...); ok {
			p.CreationPolicy = s
		}
	}
	if v := n.get("startup_order"); !v.isNull() {
		if s, ok := d.enum(v, "startup_order", valuesAt("#Profile.startup_order")...); ok {
			p.StartupOrder = s
		}
	}
	if v := n.get("stop_criteria"); !v.isNull() {
		if s, ok := d.enum(v, "stop_criteria", valuesAt("#Profile.stop_criteria")...); ok {
			p.StopCriteria = s
		}
	}
	if v := n.get("utilization_policy"); !v.isNull() && d.object(v, "utilization_policy", fieldsAt("#Profile.utilization_policy")...) {
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
	if v := n.get("schedule"); !v.isNull() && d.object(v, "schedule", fieldsAt("#Profile.schedule")...) {
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
			if !d.object(it, p, fieldsAt("#Profile.instances[]{fleet}")...) {
				continue
			}
			var ref EntityRef
			ok := false
			if fv := it.get("fleet"); fv.kind == nInt || fv.kind == nFloat {
				// dstack parses only a string or a mapping here, unlike `fleets`.
				d.errf(fv, join(p, "fleet"), "expected a fleet name or a mapping, got %s", fv.describe())
			} else {
				ref, ok = d.entityRef(fv, join(p, "fleet"))
			}
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
			if d.object(it, p, fieldsAt("#Profile.instances[]{hostname}")...) {
				if s, ok := d.str(it.get("hostname"), join(p, "hostname")); ok && s != "" {
					out = append(out, InstanceSelector{Hostname: s})
				}
			}
		case it.kind == nMap:
			if d.object(it, p, fieldsAt("#Profile.instances[]{name}")...) {
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
