package gce

import (
	"fmt"
	"net/http"
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

// kindFirewall is a VPC firewall rule
// (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls). The
// simulator records rules and enforces none: its VMs are loopback
// addresses.
const kindFirewall = "firewall"

func firewallLink(name string) string { return linkBase + "/global/firewalls/" + name }

func (p *Provider) insertFirewall(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	fw := &computepb.Firewall{}
	if e := decodeBody(r, fw); e != nil {
		return nil, e
	}
	if e := checkName("resource.name", fw.GetName()); e != nil {
		return nil, e
	}
	if _, ok := find(s, kindFirewall, func(r sim.Resource) bool { return r.Name == fw.GetName() }); ok {
		return nil, &apiError{Code: http.StatusConflict, Reason: "alreadyExists",
			Message: fmt.Sprintf("The resource 'projects/%s/global/firewalls/%s' already exists", Project, fw.GetName())}
	}
	spec, _ := protojson.Marshal(fw)
	created, err := s.Create(sim.Resource{Provider: Name, Kind: kindFirewall, ID: p.newID(), Name: fw.GetName(),
		State: sim.StateAvailable, Extra: map[string]string{extraSpec: string(spec), extraRequestID: rid}})
	if err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeGlobal, "insert", firewallLink(fw.GetName()), created.ID, nil), nil
}

func (p *Provider) getFirewall(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	name := r.PathValue("name")
	res, ok := find(s, kindFirewall, func(r sim.Resource) bool { return r.Name == name })
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/global/firewalls/%s", Project, name))
	}
	fw := &computepb.Firewall{}
	_ = protojson.Unmarshal([]byte(res.Extra[extraSpec]), fw)
	id, _ := strconv.ParseUint(res.ID, 10, 64)
	fw.Kind, fw.Id, fw.SelfLink = proto.String("compute#firewall"), proto.Uint64(id), proto.String(firewallLink(name))
	fw.CreationTimestamp = proto.String(timestamp(res.CreatedAt))
	return fw, nil
}
