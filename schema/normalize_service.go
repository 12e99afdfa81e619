package schema

import (
	"fmt"
	"regexp"
	"strings"
)

var scalingWindows = []int64{30, 60, 300}

func (d *dec) scaling(n *node, path string) *Scaling {
	if n.isNull() {
		return nil
	}
	if !d.object(n, path, fieldsAt("#Scaling")...) {
		return nil
	}
	s := &Scaling{Metric: "rps", Window: DefaultScalingWindow, ScaleUpDelay: DefaultScaleUpDelay, ScaleDownDelay: DefaultScaleDownDelay}
	if v := n.get("metric"); v.isNull() {
		d.errf(n, path, "field \"metric\" is required")
	} else {
		d.enum(v, join(path, "metric"), valuesAt("#Scaling.metric")...)
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
		if !d.object(it, p, fieldsAt("#Service.rate_limits[]")...) {
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
		if v := it.get("key"); !v.isNull() && d.object(v, join(p, "key"), fieldsAt("#Service.rate_limits[].key")...) {
			kp := join(p, "key")
			t := v.get("type")
			if t.isNull() {
				d.errf(v, kp, "field \"type\" is required")
			} else if s, ok := d.enum(t, join(kp, "type"), valuesAt("#Service.rate_limits[].key.type")...); ok {
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
		if !d.object(it, p, fieldsAt("#Probe")...) {
			continue
		}
		pr := Probe{Type: "http", URL: "/", Method: "get", Timeout: 10, Interval: 15, ReadyAfter: 1}
		if v := it.get("type"); v.isNull() {
			d.errf(it, p, "field \"type\" is required")
		} else {
			d.enum(v, join(p, "type"), valuesAt("#Probe.type")...)
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
			if s, ok := d.enum(v, join(p, "method"), valuesAt("#Probe.method")...); ok {
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
					if !d.object(h, hp, fieldsAt("#Probe.headers[]")...) {
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
	format, ok := d.enum(f, join(path, "format"), valuesAt("#Service.model.format")...)
	if !ok {
		return nil
	}
	if !d.object(n, path, fieldsAt("#Service.model{format="+format+"}")...) {
		return nil
	}
	m := &Model{Type: "chat", Format: format}
	if v := n.get("type"); !v.isNull() {
		d.enum(v, join(path, "type"), valuesAt("#Service.model.type")...)
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
		if !d.object(it, p, fieldsAt("#ReplicaGroup")...) {
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
			g.SpotPolicy, _ = d.enum(v, join(p, "spot_policy"), valuesAt("#SpotPolicy")...)
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
		if v := it.get("router"); !v.isNull() && d.object(v, join(p, "router"), fieldsAt("#ReplicaGroup.router")...) {
			rt := &Router{Type: "sglang"}
			if t := v.get("type"); !t.isNull() {
				if s, ok := d.enum(t, join(join(p, "router"), "type"), valuesAt("#ReplicaGroup.router.type")...); ok {
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
