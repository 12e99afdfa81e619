package gce

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

func findPolicy(s *sim.Sim, region, name string) (sim.Resource, bool) {
	return find(s, kindPolicy, func(r sim.Resource) bool { return r.Region == region && r.Name == name })
}

// insertPolicy creates a resource policy; only group placement policies
// (https://cloud.google.com/compute/docs/instances/use-compact-placement-policies).
func (p *Provider) insertPolicy(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	region := r.PathValue("region")
	rp := &computepb.ResourcePolicy{}
	if e := decodeBody(r, rp); e != nil {
		return nil, e
	}
	if e := checkName("resource.name", rp.GetName()); e != nil {
		return nil, e
	}
	gp := rp.GetGroupPlacementPolicy()
	if gp == nil {
		return nil, badRequest("invalid", "Invalid value for field 'resource': the simulator supports groupPlacementPolicy resource policies only.")
	}
	if _, ok := findPolicy(s, region, rp.GetName()); ok {
		return nil, &apiError{Code: http.StatusConflict, Reason: "alreadyExists",
			Message: fmt.Sprintf("The resource 'projects/%s/regions/%s/resourcePolicies/%s' already exists", Project, region, rp.GetName())}
	}
	created, err := s.Create(sim.Resource{
		Provider: Name, Kind: kindPolicy, ID: p.newID(), Name: rp.GetName(), State: sim.StateAvailable,
		Region: region,
		Extra: map[string]string{
			extraDescription: rp.GetDescription(),
			extraPlacement:   gp.GetCollocation(),
			"domains":        strconv.Itoa(int(gp.GetAvailabilityDomainCount())),
			extraRequestID:   rid,
		},
	})
	if err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeRegion(region), "insert", policyLink(region, rp.GetName()), created.ID, nil), nil
}

func (p *Provider) getPolicy(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	region, name := r.PathValue("region"), r.PathValue("name")
	res, ok := findPolicy(s, region, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/regions/%s/resourcePolicies/%s", Project, region, name))
	}
	return policyView(res), nil
}

// policyView is the API's view of a resource policy.
func policyView(res sim.Resource) *computepb.ResourcePolicy {
	region, name := res.Region, res.Name
	id, _ := strconv.ParseUint(res.ID, 10, 64)
	gp := &computepb.ResourcePolicyGroupPlacementPolicy{}
	if c := res.Extra[extraPlacement]; c != "" {
		gp.Collocation = proto.String(c)
	}
	if n, _ := strconv.Atoi(res.Extra["domains"]); n > 0 {
		gp.AvailabilityDomainCount = proto.Int32(int32(n))
	}
	return &computepb.ResourcePolicy{
		Kind: proto.String("compute#resourcePolicy"), Id: proto.Uint64(id), Name: proto.String(res.Name),
		Region: proto.String(regionLink(region)), SelfLink: proto.String(policyLink(region, name)),
		Description:          proto.String(res.Extra[extraDescription]),
		CreationTimestamp:    proto.String(timestamp(res.CreatedAt)),
		Status:               proto.String("READY"),
		GroupPlacementPolicy: gp,
	}
}

// aggregatedPolicies lists the resource policies of every region
// (resourcePolicies.aggregatedList,
// https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies/aggregatedList),
// keyed "regions/<region>". Policies have no labels: a filter may only
// name the policy.
func (p *Provider) aggregatedPolicies(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	match, e := parseFilter(r.URL.Query().Get("filter"))
	if e != nil {
		return nil, e
	}
	out := &computepb.ResourcePolicyAggregatedList{Kind: proto.String("compute#resourcePolicyAggregatedList"),
		Items: map[string]*computepb.ResourcePoliciesScopedList{}, SelfLink: proto.String(linkBase + "/aggregated/resourcePolicies")}
	for _, res := range s.List(Name, kindPolicy) {
		if deleted(res) || !match(res.Name, nil) {
			continue
		}
		key := "regions/" + res.Region
		if out.Items[key] == nil {
			out.Items[key] = &computepb.ResourcePoliciesScopedList{}
		}
		out.Items[key].ResourcePolicies = append(out.Items[key].ResourcePolicies, policyView(res))
	}
	return out, nil
}

func (p *Provider) deletePolicy(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	region, name := r.PathValue("region"), r.PathValue("name")
	res, ok := findPolicy(s, region, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/regions/%s/resourcePolicies/%s", Project, region, name))
	}
	link := policyLink(region, name)
	if user, ok := find(s, sim.KindInstance, func(r sim.Resource) bool {
		for _, pol := range strings.Fields(r.Extra[extraPolicies]) {
			if lastSegment(pol) == name && cmpOr(regionInLink(pol), r.Region) == region {
				return true
			}
		}
		return false
	}); ok {
		return nil, &apiError{Code: http.StatusBadRequest, Reason: "resourceInUseByAnotherResource",
			Message: fmt.Sprintf("The resource_policy resource 'projects/%s/regions/%s/resourcePolicies/%s' is already being used by 'projects/%s/zones/%s/instances/%s'", Project, region, name, Project, user.Zone, user.Name)}
	}
	now := s.Now().UTC()
	if _, err := s.Update(Name, res.ID, func(r *sim.Resource) error {
		r.State, r.TerminatedAt = sim.StateDeleted, &now
		r.Extra[extraDeleted] = "true"
		return nil
	}); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeRegion(region), "delete", link, res.ID, nil), nil
}
