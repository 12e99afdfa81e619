package support

import "hoist/schema"

// GatewayRefs reviews what a revision's services and gateways ask of each
// other (dstack checks these when a service is submitted,
// src/dstack/_internal/server/services/services/__init__.py): at most one
// gateway is the default; a service's gateway is declared, is the default
// one when it asks for it, has a domain, and has a certificate when the
// service asks for HTTPS. CheckAll applies it.
func GatewayRefs(d *schema.Desired) schema.Errors {
	if d == nil {
		return nil
	}
	var errs schema.Errors
	gws := map[string]*schema.Gateway{}
	def := ""
	for i := range d.Resources {
		r := &d.Resources[i]
		g, ok := r.Spec.(*schema.Gateway)
		if !ok {
			continue
		}
		gws[r.Name] = g
		if g.Default {
			if def != "" {
				errs = append(errs, r.FieldError("default", "only one gateway can be the default; %q is already", def))
				continue
			}
			def = r.Name
		}
	}
	for i := range d.Resources {
		r := &d.Resources[i]
		s, ok := r.Spec.(*schema.Service)
		if !ok {
			continue
		}
		name := def
		switch ref := s.Gateway; {
		case ref != nil && !ref.Enabled:
			continue
		case ref != nil && ref.Ref != nil:
			name = ref.Ref.Name
			if _, ok := gws[name]; !ok {
				errs = append(errs, r.FieldError("gateway", "gateway %q is not declared in this revision", name))
				continue
			}
		case ref != nil && def == "":
			errs = append(errs, r.FieldError("gateway", "the service asks for the default gateway, and no gateway is the default"))
			continue
		}
		if name == "" {
			continue
		}
		g := gws[name]
		if g.Domain == "" {
			errs = append(errs, r.FieldError("gateway", "gateway %q has no domain to serve the service at", name))
		}
		if g.Certificate == nil && s.HTTPS == "true" {
			errs = append(errs, r.FieldError("https", "cannot serve the service over HTTPS on gateway %q, which has no certificate (`certificate: null`); set `https: false` or `auto`", name))
		}
	}
	return errs
}
