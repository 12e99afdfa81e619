package schema

import (
	"regexp"
)

func (d *dec) gateway(n *node) *Gateway {
	g := &Gateway{PublicIP: true, Replicas: 1, Certificate: &Certificate{Type: "lets-encrypt"}}
	g.Name = d.optStr(n.get("name"), "name")
	g.Default = d.optBool(n.get("default"), "default", false)
	if v := n.get("backend"); v.isNull() {
		d.errf(n, "", "field \"backend\" is required")
	} else {
		g.Backend, _ = d.enum(v, "backend", valuesAt("#Backend")...)
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
		} else if d.object(c, "certificate", fieldsAt("#Gateway.certificate")...) {
			t := c.get("type")
			if t.isNull() {
				d.errf(c, "certificate", "field \"type\" is required")
			} else if s, ok := d.enum(t, "certificate.type", valuesAt("#Gateway.certificate.type")...); ok {
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
	if v := n.get("router"); !v.isNull() && d.object(v, "router", fieldsAt("#Gateway.router")...) {
		r := &GatewayRouter{Type: "sglang", Policy: "cache_aware"}
		if t := v.get("type"); !t.isNull() {
			d.enum(t, "router.type", valuesAt("#Gateway.router.type")...)
		}
		if p := v.get("policy"); !p.isNull() {
			if s, ok := d.enum(p, "router.policy", valuesAt("#Gateway.router.policy")...); ok {
				r.Policy = s
			}
		}
		r.PDDisaggregation = d.optBool(v.get("pd_disaggregation"), "router.pd_disaggregation", false)
		g.Router = r
	}
	return g
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
	// dstack's server has no local backend; hoist runs gateways on this
	// host too.
	if g.Backend != "" && !contains([]string{"aws", "azure", "gcp", "kubernetes", "local"}, g.Backend) {
		d.errf(at("backend"), "backend", "gateways are not supported for %s backend; available backends with gateway support: aws, azure, gcp, kubernetes, local", g.Backend)
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
