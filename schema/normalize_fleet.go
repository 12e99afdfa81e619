package schema

import (
	"net/netip"
	"strings"
)

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
		f.Placement, _ = d.enum(v, "placement", valuesAt("#Fleet.placement")...)
	}
	if v := n.get("blocks"); v != nil {
		f.Blocks = d.blocks(v, "blocks", 1)
	}
	if v := n.get("spot_policy"); !v.isNull() {
		f.SpotPolicy, _ = d.enum(v, "spot_policy", valuesAt("#SpotPolicy")...)
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
		if !d.object(n, path, fieldsAt("#Fleet.nodes")...) {
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
	if !d.object(n, path, fieldsAt("#SSHProxy")...) {
		return nil
	}
	p := &SSHProxy{}
	for _, req := range requiredAt("#SSHProxy") {
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
	if !d.object(n, path, fieldsAt("#Fleet.ssh_config")...) {
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
			if !d.object(h, p, fieldsAt("#Fleet.ssh_config.hosts[]")...) {
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
