package plan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"hoist/schema"
)

// Action is what a step does to one resource.
type Action string

// The actions a plan step can take.
const (
	// Create makes a resource that does not exist yet.
	Create Action = "create"
	// Update changes a live resource in place.
	Update Action = "update"
	// Replace stops or deletes the live resource and creates it anew
	// (services by a rolling deployment).
	Replace Action = "replace"
	// Delete removes a resource whose spec left the revision.
	Delete Action = "delete"
	// Noop leaves a resource as it is.
	Noop Action = "no-op"
)

// MassDeleteMin is the fewest live resources whose deletion can make a
// mass deletion: a revision deleting at least this many, and more than half
// of the live resources (or all of them), is held for confirmation.
const MassDeleteMin = 2

// Current is what the store knows about one managed resource: the spec it
// was last applied with and how it is doing.
type Current struct {
	// Kind and Name identify the resource.
	Kind schema.Kind
	Name string
	// File is the spec file it was last applied from.
	File string
	// Spec is the canonical JSON it was last applied with.
	Spec []byte
	// Status is the resource's current status in dstack's vocabulary
	// (for runs, the status of its latest run).
	Status string
	// Finished reports that a run resource's latest run is finished (done,
	// failed or terminated).
	Finished bool
	// Suspended reports that the resource is excluded from sync.
	Suspended bool
	// Prune reports that the last applied spec opted in to pruning, so that
	// removing a volume or gateway from Git deletes it without confirmation.
	Prune bool
	// PricePerHour is what the resource costs now, in dollars per hour.
	PricePerHour float64
}

// Key is the identity of a resource: runs share one namespace, fleets,
// volumes and gateways each have their own.
func Key(kind schema.Kind, name string) string {
	if kind.IsRun() {
		return "run/" + name
	}
	return string(kind) + "/" + name
}

// Observed is the state Compute plans against.
type Observed struct {
	// Resources are the managed resources that still exist (not deleted and
	// not already removed from Git).
	Resources []Current
}

// Options tunes Compute without giving it I/O.
type Options struct {
	// Estimate prices offers for the resources a revision creates or
	// changes (see CostAfter); nil means no offer is known, so those
	// resources keep their current cost.
	Estimate Pricer
	// Confirmed lifts the holds of this plan (mass deletion, budget, and
	// deletes of volumes and gateways): the user confirmed it.
	Confirmed bool
	// Project names the project planned, for the budget's hold reason.
	Project string
	// Budget is the project's budget (zero: none): a plan raising the
	// spend past it is held (see checkBudget).
	Budget Budget
	// MonthToDate is what the project spent since the start of the current
	// UTC month, in dollars, for Budget.MaxPerMonth.
	MonthToDate float64
}

// Step is what the plan does to one resource.
type Step struct {
	// Kind and Name identify the resource.
	Kind schema.Kind `json:"kind"`
	Name string      `json:"name"`
	// File is the spec file (desired, or last applied for deletes).
	File string `json:"file,omitempty"`
	// Action is what happens.
	Action Action `json:"action"`
	// Reason says why, in words a user reads in `hoist plan`.
	Reason string `json:"reason,omitempty"`
	// Changed lists the changed top-level fields (dotted for resources),
	// sorted.
	Changed []string `json:"changed,omitempty"`
	// Rolling marks a service replace done as a rolling deployment.
	Rolling bool `json:"rolling,omitempty"`
	// Held marks a step that waits for confirmation.
	Held bool `json:"held,omitempty"`
	// Cost says what a multi-node task's estimated cost is made of, e.g.
	// "2 nodes × $0.1/h = $0.2/h", or for a task with groups "1 node ×
	// $1/h + 2 nodes × $0.1/h = $1.2/h" (empty for other steps, and when no
	// offer prices it).
	Cost string `json:"cost,omitempty"`
	// PriceBefore is what the resource costs now and PriceAfter what it is
	// estimated to cost once the step is applied, in dollars per hour (nil
	// when unknown: no current resource, or no offer prices it); a pull
	// request's preview shows them per resource.
	PriceBefore *float64 `json:"price_before,omitempty"`
	PriceAfter  *float64 `json:"price_after,omitempty"`
	// Jobs lists a workflow's jobs as the revision generates them (empty
	// while a program provider has not run on this input: its program
	// runs first, Program says).
	Jobs []PlannedJob `json:"jobs,omitempty"`
	// Program is set for a workflow whose jobs its provider's program
	// prints when it runs.
	Program bool `json:"program,omitempty"`
	// ProviderCommit is the commit a workflow's provider of another
	// repository was read from.
	ProviderCommit string `json:"provider_commit,omitempty"`
	// Desired is the resource as the revision declares it (nil for deletes).
	Desired *schema.Resource `json:"-"`
	// Current is the resource as it is (nil for creates).
	Current *Current `json:"-"`
}

// Plan is the result of Compute.
type Plan struct {
	// Steps holds one step per resource, in deterministic order.
	Steps []Step `json:"steps"`
	// Held is set when the plan as a whole waits for confirmation; HoldReason
	// says why.
	Held       bool   `json:"held,omitempty"`
	HoldReason string `json:"hold_reason,omitempty"`
	// CostBefore is the spend in dollars per hour now (the sum of the
	// current resources' prices); CostAfter estimates it once the plan is
	// applied.
	CostBefore float64 `json:"cost_before"`
	CostAfter  float64 `json:"cost_after"`
	// Budget is the plan's verdict against its project's budget (nil when
	// the project has none).
	Budget *BudgetCheck `json:"budget,omitempty"`
	// Warnings name fields of the planned specs that have no effect in
	// hoist, one "path:line:col: message" each; they never block a plan.
	Warnings []string `json:"warnings,omitempty"`
	// Now is the time the plan was computed for.
	Now time.Time `json:"now"`
}

// Changes reports whether the plan does anything.
func (p Plan) Changes() bool {
	for _, s := range p.Steps {
		if s.Action != Noop {
			return true
		}
	}
	return false
}

// Count returns how many steps take action a.
func (p Plan) Count(a Action) int {
	n := 0
	for _, s := range p.Steps {
		if s.Action == a {
			n++
		}
	}
	return n
}

// Compute plans desired against observed at now. It is pure and
// deterministic: the same inputs always give the same plan.
func Compute(desired []schema.Resource, observed Observed, now time.Time, opts Options) Plan {
	// Maps keyed as Key keys, without building 3 strings per resource.
	type key struct {
		ns   string
		name string
	}
	cur := make(map[key]*Current, len(observed.Resources))
	for i := range observed.Resources {
		c := &observed.Resources[i]
		cur[key{c.Kind.Namespace(), c.Name}] = c
	}
	p := Plan{Now: now, Steps: make([]Step, 0, len(desired))}
	seen := make(map[key]bool, len(desired))
	for i := range desired {
		d := &desired[i]
		k := key{d.Kind.Namespace(), d.Name}
		seen[k] = true
		c := cur[k]
		s := stepFor(d, c, opts.Confirmed)
		p.Steps = append(p.Steps, s)
	}
	for i := range observed.Resources {
		c := &observed.Resources[i]
		p.CostBefore += c.PricePerHour
		if seen[key{c.Kind.Namespace(), c.Name}] {
			continue
		}
		if c.Suspended {
			// No sync while suspended, removal included.
			p.Steps = append(p.Steps, Step{Kind: c.Kind, Name: c.Name, File: c.File, Action: Noop, Current: c,
				Reason: "suspended; removal from Git waits until resumed"})
			continue
		}
		s := Step{Kind: c.Kind, Name: c.Name, File: c.File, Action: Delete, Current: c}
		switch {
		case c.Kind.IsRun() && c.Finished:
			s.Reason = "spec removed from Git; the run is already finished"
		case c.Kind.IsRun():
			s.Reason = "spec removed from Git; the run will be stopped"
		case c.Kind == schema.KindFleet:
			s.Reason = "spec removed from Git; instances terminate once no active run uses them"
		case c.Prune:
			s.Reason = "spec removed from Git; the spec opted in to pruning"
		default:
			s.Reason = "spec removed from Git; deleting a " + string(c.Kind) + " needs confirmation"
			s.Held = !opts.Confirmed
		}
		p.Steps = append(p.Steps, s)
	}
	// The generic stable sort: sort.SliceStable swaps these large steps
	// through reflection, a tenth of a re-plan of 10,000 specs.
	slices.SortStableFunc(p.Steps, func(a, b Step) int {
		if c := cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	// CostAfter: what a step keeps costs what it costs now (an unchanged
	// plan shows an unchanged spend); what it creates or changes is
	// estimated (fleets by their nodes, runs by what they add to their
	// fleets); deletes cost nothing.
	fleets := newFleetSet(desired)
	for i, s := range p.Steps {
		if s.Current != nil {
			v := s.Current.PricePerHour
			p.Steps[i].PriceBefore = &v
		}
		if s.Action == Delete || s.Desired == nil {
			zero := 0.0
			p.Steps[i].PriceAfter = &zero
			continue
		}
		if wf, ok := s.Desired.Spec.(*schema.Workflow); ok {
			p.Steps[i].Jobs, p.Steps[i].Program, p.Steps[i].ProviderCommit = plannedJobs(wf, fleets, opts.Estimate)
		}
		if v, cost, ok := estimate(s, fleets, opts.Estimate); ok {
			p.CostAfter += v
			p.Steps[i].PriceAfter = &v
			if v > 0 {
				p.Steps[i].Cost = cost
			}
		}
	}
	// Mass deletion: only live resources count (a finished run whose spec
	// leaves Git loses nothing), and one resource alone is never a mass.
	deletes, total := 0, 0
	for _, c := range observed.Resources {
		if c.Kind.IsRun() && c.Finished {
			continue
		}
		total++
	}
	for _, s := range p.Steps {
		if s.Action == Delete && !(s.Current.Kind.IsRun() && s.Current.Finished) {
			deletes++
		}
	}
	var reasons []string
	if deletes >= MassDeleteMin && !opts.Confirmed && (deletes == total || deletes*2 > total) {
		reasons = append(reasons, fmt.Sprintf("the revision deletes %d of %d live resources; confirm to apply", deletes, total))
	}
	if why := checkBudget(&p, opts); why != "" && !opts.Confirmed {
		reasons = append(reasons, why)
	}
	if len(reasons) > 0 {
		p.Held, p.HoldReason = true, strings.Join(reasons, "; and ")
	}
	return p
}

// kindOrder orders steps so that what others depend on comes first:
// volumes and gateways, then fleets, then runs.
func kindOrder(k schema.Kind) int {
	switch k {
	case schema.KindVolume:
		return 0
	case schema.KindGateway:
		return 1
	case schema.KindFleet:
		return 2
	default:
		return 3
	}
}

func stepFor(d *schema.Resource, c *Current, confirmed bool) Step {
	s := Step{Kind: d.Kind, Name: d.Name, File: d.File, Desired: d, Current: c}
	switch {
	case c == nil:
		s.Action, s.Reason = Create, "new spec"
		return s
	case c.Kind != d.Kind:
		s.Action, s.Reason = Replace, fmt.Sprintf("type changed from %s to %s", c.Kind, d.Kind)
		s.Changed = []string{"type"}
		return s
	}
	changed := ChangedFields(c.Spec, d.JSON)
	s.Changed = changed
	if len(changed) == 0 {
		s.Action, s.Reason = Noop, "in sync"
		if c.Suspended {
			s.Reason = "suspended"
		}
		return s
	}
	if c.Suspended {
		s.Action, s.Reason = Noop, "suspended; changes wait until resumed"
		return s
	}
	inPlace, rolling := updatable(d.Kind, c.Spec, d.JSON, changed)
	switch {
	case c.Kind.IsRun() && c.Finished:
		// A finished run is never updated: the new spec runs anew.
		s.Action, s.Reason = Replace, "spec changed; the finished run is submitted again"
	case inPlace:
		s.Action, s.Reason = Update, "fields can be updated in place"
	case rolling:
		s.Action, s.Rolling, s.Reason = Replace, true, "spec changed; replicas are replaced by a rolling deployment"
	case d.Kind == schema.KindVolume:
		s.Action, s.Reason = Replace, "volumes cannot be updated in place; re-creating deletes the volume and needs confirmation"
		s.Held = !confirmed
	case d.Kind.IsRun():
		s.Action, s.Reason = Replace, "spec changed; the run is stopped and submitted again"
	default:
		s.Action, s.Reason = Replace, "changed fields cannot be updated in place; the "+string(d.Kind)+" is re-created"
	}
	return s
}

// Fields each kind may change in place, and the service fields a rolling
// deployment applies (dstack's src/dstack/_internal/server/services/runs/spec.py).
var (
	inPlaceRun     = []string{"priority"}
	inPlaceDevEnv  = []string{"priority", "inactivity_duration"}
	inPlaceService = []string{"priority", "replicas", "scaling", "groups"}
	rollingService = []string{"port", "probes", "resources", "volumes", "docker", "files", "image",
		"user", "privileged", "entrypoint", "working_dir", "python", "nvcc", "single_branch", "env",
		"shell", "commands", "model", "rate_limits"}
	inPlaceCloudFleet = []string{"nodes", "reservation", "tags", "resources", "backends", "regions",
		"availability_zones", "instance_types", "spot_policy", "max_price", "idle_duration"}
	inPlaceGateway = []string{"domain", "default", "replicas"}
)

// updatable reports whether the changed fields can be applied in place, or
// (for services) by a rolling deployment.
func updatable(kind schema.Kind, before, after []byte, changed []string) (inPlace, rolling bool) {
	top := topLevel(changed)
	switch kind {
	case schema.KindTask:
		return subset(top, inPlaceRun), false
	case schema.KindDevEnvironment:
		return subset(top, inPlaceDevEnv), false
	case schema.KindService:
		if subset(top, inPlaceService) {
			return true, false
		}
		return false, subset(top, append(slices.Clone(inPlaceService), rollingService...))
	case schema.KindFleet:
		bSSH, aSSH := hasField(before, "ssh_config"), hasField(after, "ssh_config")
		if bSSH != aSSH {
			return false, false // cloud <-> SSH switch
		}
		if aSSH {
			return sshHostsOnly(before, after, changed), false
		}
		return subset(top, inPlaceCloudFleet), false
	case schema.KindGateway:
		return subset(top, inPlaceGateway), false
	default:
		return false, false
	}
}

// sshHostsOnly reports whether an SSH fleet change only adds or removes
// hosts (and touches in-place fleet fields); a changed host entry is not.
func sshHostsOnly(before, after []byte, changed []string) bool {
	for _, f := range changed {
		if f != "ssh_config.hosts" && f != "nodes" && f != "idle_duration" && f != "tags" {
			return false
		}
	}
	var b, a struct {
		SSH struct {
			Hosts []json.RawMessage `json:"hosts"`
		} `json:"ssh_config"`
	}
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil {
		return false
	}
	host := func(raw json.RawMessage) (string, string) {
		var h struct {
			Hostname string `json:"hostname"`
		}
		_ = json.Unmarshal(raw, &h)
		return h.Hostname, string(canonicalize(raw))
	}
	old := map[string]string{}
	for _, r := range b.SSH.Hosts {
		n, v := host(r)
		old[n] = v
	}
	for _, r := range a.SSH.Hosts {
		n, v := host(r)
		if prev, ok := old[n]; ok && prev != v {
			return false
		}
	}
	return true
}

func topLevel(fields []string) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		top, _, _ := strings.Cut(f, ".")
		if len(out) == 0 || out[len(out)-1] != top {
			out = append(out, top)
		}
	}
	return out
}

func subset(fields, allowed []string) bool {
	for _, f := range fields {
		if !slices.Contains(allowed, f) {
			return false
		}
	}
	return true
}

func hasField(spec []byte, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(spec, &m) != nil {
		return false
	}
	v, ok := m[name]
	return ok && string(v) != "null"
}

// ChangedFields compares two canonical JSON specs and returns the changed
// field paths, sorted: top-level names, and one level deeper for objects
// (e.g. "resources.gpu", "ssh_config.hosts").
func ChangedFields(before, after []byte) []string {
	if bytes.Equal(before, after) {
		return nil // canonical specs that mean the same are byte-identical
	}
	var b, a map[string]json.RawMessage
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil {
		if bytes.Equal(before, after) {
			return nil
		}
		return []string{"spec"}
	}
	var out []string
	for _, k := range unionKeys(b, a) {
		bv, av := b[k], a[k]
		if bytes.Equal(canonicalize(bv), canonicalize(av)) {
			continue
		}
		var bm, am map[string]json.RawMessage
		if json.Unmarshal(bv, &bm) == nil && json.Unmarshal(av, &am) == nil && bm != nil && am != nil {
			for _, sk := range unionKeys(bm, am) {
				if !bytes.Equal(canonicalize(bm[sk]), canonicalize(am[sk])) {
					out = append(out, k+"."+sk)
				}
			}
			continue
		}
		out = append(out, k)
	}
	return out
}

func unionKeys(a, b map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// canonicalize re-encodes a JSON value with sorted keys and no insignificant
// space, treating a missing value and null alike.
func canonicalize(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
