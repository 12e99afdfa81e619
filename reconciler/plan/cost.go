package plan

import (
	"fmt"
	"slices"
	"strings"

	"hoist/schema"
)

// Pricer returns the dollars per hour of the cheapest offer that fits
// resources and profile, or false when no offer is known. It must be pure
// (e.g. answer from an offline catalog) so that Compute stays pure.
type Pricer func(res schema.Resources, prof schema.Profile) (float64, bool)

// Instance is what pricing needs of one instance.
type Instance struct {
	// Fleet is the name of the instance's fleet.
	Fleet string
	// Status is the instance's status in dstack's vocabulary.
	Status string
	// Price is what the instance costs in dollars per hour: its offer's
	// price; 0 for an SSH host and for this host.
	Price float64
	// Runs are the keys (names or ids, as the caller chooses) of the runs
	// whose unfinished jobs occupy the instance.
	Runs []string
}

// Billed reports whether an instance in status (dstack's vocabulary) costs
// money: it exists at its provider, from provisioning until terminated.
func Billed(status string) bool {
	switch status {
	case "provisioning", "idle", "busy", "terminating":
		return true
	}
	return false
}

// Costs is what instances cost, in dollars per hour.
type Costs struct {
	// Total counts every billed instance once: the spend per hour now.
	Total float64
	// Fleets is the cost of each fleet's billed instances, by fleet name.
	Fleets map[string]float64
	// Runs is the cost of the billed instances each run occupies, by run
	// key; an instance several runs share counts for each of them.
	Runs map[string]float64
}

// CostsOf prices instances. It is the one place hoist computes a cost per
// hour of what runs: the plan's current prices, the dashboard's spend per
// hour and each run's cost per hour all come from it.
func CostsOf(insts []Instance) Costs {
	c := Costs{Fleets: map[string]float64{}, Runs: map[string]float64{}}
	for _, i := range insts {
		if !Billed(i.Status) || i.Price <= 0 {
			continue
		}
		c.Total += i.Price
		c.Fleets[i.Fleet] += i.Price
		seen := make([]string, 0, len(i.Runs))
		for _, r := range i.Runs {
			if !slices.Contains(seen, r) { // once per run, however many jobs
				seen = append(seen, r)
				c.Runs[r] += i.Price
			}
		}
	}
	return c
}

// CurrentPrices sets the PricePerHour of each current resource from the
// instances: a fleet costs its billed instances; a run costs the billed
// instances it occupies that belong to no fleet among resources (e.g. a
// fleet removed from Git that still drains), so that no instance is
// counted twice and the sum over resources is Costs.Total whenever every
// billed instance belongs to a fleet resource or is occupied by a run.
func CurrentPrices(resources []Current, insts []Instance) {
	managed := map[string]bool{}
	for _, r := range resources {
		if r.Kind == schema.KindFleet {
			managed[r.Name] = true
		}
	}
	var others []Instance
	for _, i := range insts {
		if !managed[i.Fleet] {
			others = append(others, i)
		}
	}
	all, rest := CostsOf(insts), CostsOf(others)
	for k := range resources {
		r := &resources[k]
		switch {
		case r.Kind == schema.KindFleet:
			r.PricePerHour = all.Fleets[r.Name]
		case r.Kind.IsRun():
			r.PricePerHour = rest.Runs[r.Name]
		}
	}
}

// fleetNodes is how many instances a backend fleet keeps without a job
// asking: nodes.target (at least nodes.min, at most nodes.max).
func fleetNodes(f *schema.Fleet) int {
	if f.Nodes == nil {
		return 0
	}
	n := max(f.Nodes.Target, f.Nodes.Min)
	if f.Nodes.Max != nil {
		n = min(n, *f.Nodes.Max)
	}
	return n
}

// fleetProfile is the profile a fleet's offers are asked with.
func fleetProfile(f *schema.Fleet) schema.Profile {
	return schema.Profile{Backends: f.Backends, Regions: f.Regions, AvailabilityZones: f.AvailabilityZones,
		InstanceTypes: f.InstanceTypes, SpotPolicy: f.SpotPolicy, MaxPrice: f.MaxPrice}
}

// estimateFleet prices a desired fleet: an SSH fleet's hosts are $0 (they
// are the user's); a backend fleet costs the instances it keeps without a
// job asking (nodes.target, at least nodes.min) at the cheapest offer that
// fits its resources and profile.
func estimateFleet(f *schema.Fleet, price Pricer) (float64, bool) {
	n := fleetNodes(f)
	if f.SSHConfig != nil || n == 0 {
		return 0, true
	}
	if price == nil {
		return 0, false
	}
	var res schema.Resources
	if f.Resources != nil {
		res = *f.Resources
	}
	p, ok := price(res, fleetProfile(f))
	if !ok {
		return 0, false
	}
	return float64(n) * p, true
}

// fleetSet is the desired fleets of a revision, as runs' estimates need
// them.
type fleetSet struct {
	byName map[string]*schema.Fleet
	// anyKept is set when some fleet keeps instances without a job asking
	// (an SSH fleet, or nodes above 0); grow is the first fleet by name that
	// grows for jobs. Together they answer for a run that names no fleet.
	anyKept bool
	grow    *schema.Fleet
	// cluster is the set of the fleets with `placement: cluster`, the only
	// ones a multi-node run is placed on (as dstack does); nil in it.
	cluster *fleetSet
}

func newFleetSet(desired []schema.Resource) fleetSet {
	fs := fleetSetOf(desired, func(*schema.Fleet) bool { return true })
	cl := fleetSetOf(desired, func(f *schema.Fleet) bool { return f.Placement == "cluster" })
	fs.cluster = &cl
	return fs
}

// fleetSetOf is the set of the desired fleets keep accepts.
func fleetSetOf(desired []schema.Resource, keep func(*schema.Fleet) bool) fleetSet {
	fs := fleetSet{byName: map[string]*schema.Fleet{}}
	var names []string
	for i := range desired {
		if f, ok := desired[i].Spec.(*schema.Fleet); ok && keep(f) {
			fs.byName[desired[i].Name] = f
			names = append(names, desired[i].Name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		f := fs.byName[n]
		if kept(f) {
			fs.anyKept = true
		} else if grows(f) && fs.grow == nil {
			fs.grow = f
		}
	}
	return fs
}

// kept reports whether a fleet keeps instances without a job asking.
func kept(f *schema.Fleet) bool { return f.SSHConfig != nil || fleetNodes(f) > 0 }

// grows reports whether a fleet provisions instances for jobs.
func grows(f *schema.Fleet) bool {
	return f.SSHConfig == nil && f.Nodes != nil && (f.Nodes.Max == nil || *f.Nodes.Max > 0)
}

// estimateRun prices what one job of a desired run adds to the spend: $0
// when it runs on instances a fleet already keeps (an SSH fleet's hosts, a
// backend fleet's nodes, this host: the fleet's own line prices them), else
// the cheapest offer a fleet that grows for jobs (nodes.min 0) would
// provision for it.
func estimateRun(res schema.Resources, prof schema.Profile, fleets fleetSet, price Pricer) (float64, bool) {
	anyKept, grow := fleets.anyKept, fleets.grow
	if len(prof.Fleets) > 0 {
		anyKept, grow = false, nil
		growName := ""
		for _, ref := range prof.Fleets {
			f, ok := fleets.byName[ref.Name]
			switch {
			case !ok:
			case kept(f):
				anyKept = true
			case grows(f) && (grow == nil || ref.Name < growName):
				grow, growName = f, ref.Name
			}
		}
	}
	if anyKept || grow == nil {
		// On a fleet's kept instances; or no fleet of the revision takes
		// it: this host's fleet (free), or none and the run fails for want
		// of capacity.
		return 0, true
	}
	if price == nil {
		return 0, false
	}
	fp := fleetProfile(grow)
	if len(fp.Backends) == 0 {
		fp.Backends = prof.Backends
	}
	if len(fp.Regions) == 0 {
		fp.Regions = prof.Regions
	}
	if len(fp.InstanceTypes) == 0 {
		fp.InstanceTypes = prof.InstanceTypes
	}
	if fp.SpotPolicy == "" {
		fp.SpotPolicy = prof.SpotPolicy
	}
	if fp.MaxPrice == nil || (prof.MaxPrice != nil && *prof.MaxPrice < *fp.MaxPrice) {
		fp.MaxPrice = prof.MaxPrice
	}
	return price(res, fp)
}

// pricedFleetField reports whether changing a fleet's top-level field
// changes what the fleet costs.
func pricedFleetField(f string) bool {
	switch f {
	case "nodes", "resources", "backends", "regions", "availability_zones", "instance_types", "spot_policy", "max_price", "ssh_config":
		return true
	}
	return false
}

// runJobs is a part of a run's first submission: jobs jobs asking for
// res.
type runJobs struct {
	res  schema.Resources
	jobs int
}

// runResources returns the parts of a run spec's first submission (a
// task's nodes, or each of its groups' nodes with the group's resources; a
// service's replicas.min) and its profile.
func runResources(spec any) ([]runJobs, schema.Profile, bool) {
	switch s := spec.(type) {
	case *schema.Task:
		if len(s.Groups) > 0 {
			parts := make([]runJobs, len(s.Groups))
			for i, g := range s.Groups {
				parts[i] = runJobs{g.Resources, g.Nodes}
			}
			return parts, s.Profile, true
		}
		return []runJobs{{s.Resources, max(s.Nodes, 1)}}, s.Profile, true
	case *schema.Service:
		n := 1
		if s.Replicas.Min != nil {
			n = int(*s.Replicas.Min)
		}
		return []runJobs{{s.Resources, n}}, s.Profile, true
	case *schema.DevEnvironment:
		return []runJobs{{s.Resources, 1}}, s.Profile, true
	case *schema.Workflow:
		if len(s.Jobs) == 0 {
			return []runJobs{{s.Resources, 1}}, s.Profile, true // the provider's program
		}
		parts := make([]runJobs, len(s.Jobs))
		for i, j := range s.Jobs {
			parts[i] = runJobs{j.Resources, 1}
		}
		return parts, s.Profile, true
	}
	return nil, schema.Profile{}, false
}

// estimate is what a step's resource is expected to cost once applied:
// what it costs now when the step keeps it as it is, else the estimate of
// its kind; ok is false when neither is known. For a multi-node task's
// estimate, cost says what it is made of (nodesCost).
func estimate(s Step, fleets fleetSet, price Pricer) (v float64, cost string, ok bool) {
	keep := s.Action == Noop || (s.Action == Update && (s.Kind.IsRun() || !slices.ContainsFunc(topLevel(s.Changed), pricedFleetField)))
	if keep && s.Current != nil {
		return s.Current.PricePerHour, "", true
	}
	switch spec := s.Desired.Spec.(type) {
	case *schema.Fleet:
		if v, ok := estimateFleet(spec, price); ok {
			return v, "", true
		}
	default:
		if parts, prof, ok := runResources(spec); ok {
			fs, nodes := fleets, 0
			for _, p := range parts {
				nodes += p.jobs
			}
			_, task := spec.(*schema.Task)
			if task && nodes > 1 && fleets.cluster != nil {
				fs = *fleets.cluster
			}
			prices := make([]float64, len(parts))
			for i, p := range parts {
				if prices[i], ok = estimateRun(p.res, prof, fs, price); !ok {
					break
				}
				v += float64(p.jobs) * prices[i]
			}
			if ok {
				if task && nodes > 1 {
					cost = nodesCost(parts, prices, v)
				}
				if wf, isWf := spec.(*schema.Workflow); isWf {
					cost = workflowCost(wf, prices, v)
				}
				return v, cost, true
			}
		}
	}
	if s.Current != nil {
		return s.Current.PricePerHour, "", true
	}
	return 0, "", false
}

// nodesCost says what a multi-node task's estimate v is made of: the
// nodes of each part (its groups, or all its nodes) times the price of
// each, e.g. "1 node × $10/h + 2 nodes × $1/h = $12/h".
func nodesCost(parts []runJobs, prices []float64, v float64) string {
	terms := make([]string, len(parts))
	for i, p := range parts {
		terms[i] = fmt.Sprintf("%d %s × $%.4g/h", p.jobs, map[bool]string{true: "node", false: "nodes"}[p.jobs == 1], prices[i])
	}
	return fmt.Sprintf("%s = $%.4g/h", strings.Join(terms, " + "), v)
}

// workflowCost says what a workflow's estimate v is made of: its jobs by
// price, all at once (the most it can cost, when every job runs in
// parallel), e.g. "1 job × $1/h + 2 jobs × $0.5/h = $2/h if all run at
// once"; or its provider's program, before the program has generated the
// jobs.
func workflowCost(wf *schema.Workflow, prices []float64, v float64) string {
	if len(wf.Jobs) == 0 {
		return fmt.Sprintf("the provider's program $%.4g/h; its jobs are priced once it has run", v)
	}
	var order []float64
	count := map[float64]int{}
	for _, p := range prices {
		if count[p] == 0 {
			order = append(order, p)
		}
		count[p]++
	}
	terms := make([]string, len(order))
	for i, p := range order {
		terms[i] = fmt.Sprintf("%d %s × $%.4g/h", count[p], map[bool]string{true: "job", false: "jobs"}[count[p] == 1], p)
	}
	return fmt.Sprintf("%s = $%.4g/h if all run at once", strings.Join(terms, " + "), v)
}

// PlannedJob is one job of a workflow as a plan shows it.
type PlannedJob struct {
	Name      string   `json:"name"`
	Image     string   `json:"image,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	Master    string   `json:"master,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
	// PricePerHour is the job's estimated price, when an offer prices it.
	PricePerHour *float64 `json:"price_per_hour,omitempty"`
}

// plannedJobs lists a workflow's jobs with their prices, whether its
// program runs first, and its provider's commit.
func plannedJobs(wf *schema.Workflow, fleets fleetSet, price Pricer) ([]PlannedJob, bool, string) {
	out := make([]PlannedJob, len(wf.Jobs))
	for i, j := range wf.Jobs {
		out[i] = PlannedJob{Name: j.Name, Image: j.Image, DependsOn: j.DependsOn, Master: j.Master, Artifacts: j.Artifacts}
		if v, ok := estimateRun(j.Resources, wf.Profile, fleets, price); ok {
			out[i].PricePerHour = &v
		}
	}
	return out, wf.Program != nil && len(wf.Jobs) == 0, wf.Provider.Commit
}
