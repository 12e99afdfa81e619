package storeview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/store"
	"hoist/web"
)

// View reads one project of a store for the web.
type View struct {
	st      *store.Store
	project string
}

var (
	_ web.Store      = (*View)(nil)
	_ web.Inventory  = (*View)(nil)
	_ web.Tokens     = (*View)(nil)
	_ web.RunCounter = (*View)(nil)
	_ web.JobGetter  = (*View)(nil)
	_ web.LogTailer  = (*View)(nil)
)

// New returns a view of project (store.DefaultProject when empty).
func New(st *store.Store, project string) *View {
	if project == "" {
		project = store.DefaultProject
	}
	return &View{st: st, project: project}
}

// mapErr turns store.ErrNotFound into web.ErrNotFound, keeping the message.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", web.ErrNotFound, err.Error())
	}
	return err
}

// prices maps instance id to price per hour (and name) for every live
// instance.
type instInfo struct {
	name  string
	price float64
}

func (v *View) instances(ctx context.Context) (map[string]instInfo, error) {
	is, err := v.st.ListInstances(ctx, store.InfraFilter{Project: v.project, IncludeDeleted: true, Limit: 100000})
	if err != nil {
		return nil, err
	}
	m := make(map[string]instInfo, len(is))
	for _, i := range is {
		m[i.ID] = instInfo{name: i.Name, price: i.Price}
	}
	return m, nil
}

// ListRuns implements web.Store with narrow queries: the runs' listed
// columns, the names of their fleets, and the prices of the instances active jobs occupy.
// Cost per hour is the sum of those prices per run.
func (v *View) ListRuns(ctx context.Context, f web.RunFilter) ([]web.Run, error) {
	runs, err := v.st.ListRunSummaries(ctx, store.RunSummaryFilter{Project: v.project, Status: f.Status, Type: f.Type,
		Fleet: f.Fleet, Limit: f.Limit, Offset: f.Offset})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.FleetID
	}
	fleetNames, err := v.fleetNames(ctx, ids)
	if err != nil {
		return nil, err
	}
	cost, err := v.activeCost(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Run, 0, len(runs))
	for _, r := range runs {
		out = append(out, web.Run{
			Name:              r.Name,
			Type:              r.Type,
			Status:            r.Status,
			StatusMessage:     r.StatusMessage,
			TerminationReason: r.TerminationReason,
			Revision:          r.Revision,
			Fleet:             fleetNames[r.FleetID],
			SubmittedAt:       r.SubmittedAt,
			UpdatedAt:         r.UpdatedAt,
			RemovedFromGit:    r.RemovedFromGit,
			CostPerHour:       cost[r.ID],
		})
	}
	return out, nil
}

// fleetNames maps the fleets of ids (repeats and "" allowed), deleted
// ones included, to their names: a list names the few fleets its rows
// are on, not the thousands a repository may hold.
func (v *View) fleetNames(ctx context.Context, ids []string) (map[string]string, error) {
	var distinct []string
	seen := map[string]bool{"": true}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			distinct = append(distinct, id)
		}
	}
	return v.st.FleetNames(ctx, v.project, distinct)
}

// activeCost prices, per run id, the billed instances its unfinished jobs
// occupy (plan.CostsOf, as the plan's and the overview's spend).
func (v *View) activeCost(ctx context.Context) (map[string]float64, error) {
	occ, err := v.st.ListOccupancy(ctx)
	if err != nil {
		return nil, err
	}
	if len(occ) == 0 {
		return map[string]float64{}, nil
	}
	byID := make(map[string]*plan.Instance, len(occ))
	for _, o := range occ {
		pi, ok := byID[o.InstanceID]
		if !ok {
			pi = &plan.Instance{Status: o.InstanceStatus, Price: o.Price}
			byID[o.InstanceID] = pi
		}
		pi.Runs = append(pi.Runs, o.RunID)
	}
	in := make([]plan.Instance, 0, len(byID))
	for _, pi := range byID {
		in = append(in, *pi)
	}
	return plan.CostsOf(in).Runs, nil
}

// CountRuns implements web.RunCounter: the project's runs by status.
func (v *View) CountRuns(ctx context.Context) (map[string]int, error) {
	return v.st.CountRunsByStatus(ctx, v.project)
}

func runView(r store.Run, fleetNames map[string]string) web.Run {
	return web.Run{
		Name:              r.Name,
		Type:              r.Type,
		Status:            r.Status,
		StatusMessage:     r.StatusMessage,
		TerminationReason: r.TerminationReason,
		Revision:          r.Revision,
		Fleet:             fleetNames[r.FleetID],
		SubmittedAt:       r.SubmittedAt,
		UpdatedAt:         r.UpdatedAt,
		Spec:              r.Spec,
		RemovedFromGit:    r.RemovedFromGit,
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func jobView(j store.Job, inst map[string]instInfo, names workflowNames) web.Job {
	wj := names.of(j)
	return web.Job{
		JobNum:             j.JobNum,
		WorkflowJob:        wj.Name,
		DependsOn:          wj.DependsOn,
		ID:                 j.ID,
		SubmissionID:       j.ID,
		SubmissionNum:      j.SubmissionNum,
		JobName:            j.JobName,
		Group:              nodeGroup(j),
		Status:             j.Status,
		StatusMessage:      j.StatusMessage,
		ExitCode:           j.ExitCode,
		TerminationReason:  j.TerminationReason,
		TerminationMessage: j.TerminationMessage,
		Instance:           inst[j.InstanceID].name,
		Price:              inst[j.InstanceID].price,
		SubmittedAt:        j.SubmittedAt,
		StartedAt:          timePtr(j.StartedAt),
		FinishedAt:         timePtr(j.FinishedAt),
		RunName:            j.RunName,
	}
}

// workflowJobName is a workflow job's name ("provider" for a program
// provider's job 0) and the jobs it depends on.
type workflowJobName struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on"`
}

// workflowSpec is a workflow's job names in job-number order.
type workflowSpec []workflowJobName

// workflowNames names workflow jobs, decoding each spec once per listing:
// a workflow's spec holds a thousand jobs and every job row carries a
// copy. A run's jobs carry its spec as it was when they were created,
// which for a workflow is one of two: before its provider's program
// printed the jobs, and after (longer, with them); so a run and a spec
// length name one spec.
type workflowNames map[workflowSpecKey]workflowSpec

type workflowSpecKey struct {
	runID string
	size  int
}

// of returns job j's workflow name and dependencies; zero for a job that
// is not a workflow's.
func (n workflowNames) of(j store.Job) workflowJobName {
	if !bytes.HasPrefix(j.Spec, []byte(`{"type":"workflow"`)) {
		return workflowJobName{}
	}
	k := workflowSpecKey{j.RunID, len(j.Spec)}
	spec, ok := n[k]
	if !ok {
		spec = decodeWorkflowSpec(j.Spec)
		n[k] = spec
	}
	if j.JobNum < 0 || j.JobNum >= len(spec) {
		return workflowJobName{}
	}
	return spec[j.JobNum]
}

// decodeWorkflowSpec lists a workflow spec's jobs by job number: its
// provider's program first when it has one (job 0), then the generated
// jobs.
func decodeWorkflowSpec(b []byte) workflowSpec {
	var s struct {
		Program *struct{}         `json:"program"`
		Jobs    []workflowJobName `json:"jobs"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out workflowSpec
	if s.Program != nil {
		out = append(out, workflowJobName{Name: "provider"})
	}
	return append(out, s.Jobs...)
}

// nodeGroup names the group of a task with groups whose node job j is
// (job numbers count through the groups' nodes in order); "" for other
// jobs.
func nodeGroup(j store.Job) string {
	if !bytes.Contains(j.Spec, []byte(`"groups"`)) {
		return ""
	}
	var s struct {
		Type   string `json:"type"`
		Groups []struct {
			Name  string `json:"name"`
			Nodes int    `json:"nodes"`
		} `json:"groups"`
	}
	if json.Unmarshal(j.Spec, &s) != nil || s.Type != "task" {
		return ""
	}
	n := j.JobNum
	for _, g := range s.Groups {
		if n < g.Nodes {
			return g.Name
		}
		n -= g.Nodes
	}
	return ""
}

// GetRun implements web.Store.
func (v *View) GetRun(ctx context.Context, name string) (web.Run, error) {
	r, err := v.st.GetRunByName(ctx, v.project, name)
	if err != nil {
		return web.Run{}, mapErr(err)
	}
	fleetNames := map[string]string{}
	if r.FleetID != "" {
		if fl, err := v.st.GetFleet(ctx, r.FleetID); err == nil {
			fleetNames[fl.ID] = fl.Name
		}
	}
	wr := runView(r, fleetNames)
	wr.Warnings = v.runWarnings(ctx, r)
	// Earlier runs of the same name (replaced by a new revision) keep
	// their submissions visible.
	prev, err := v.st.ListRuns(ctx, store.RunFilter{Project: v.project, Name: name, IncludeDeleted: true, Limit: 50})
	if err != nil {
		return web.Run{}, err
	}
	inst, err := v.instances(ctx)
	if err != nil {
		return web.Run{}, err
	}
	names := workflowNames{}
	for _, pr := range prev {
		jobs, err := v.st.ListJobs(ctx, pr.ID)
		if err != nil {
			return web.Run{}, err
		}
		if pr.ID == r.ID {
			wr.IDEURL = ideURL(r, jobs)
		}
		for _, j := range jobs {
			wj := jobView(j, inst, names)
			if pr.ID != r.ID {
				wj.Revision = pr.Revision
			}
			wr.Jobs = append(wr.Jobs, wj)
		}
	}
	cost, err := v.activeCost(ctx)
	if err != nil {
		return web.Run{}, err
	}
	wr.CostPerHour = cost[r.ID]
	sortJobs(wr.Jobs)
	if wr.Jobs == nil {
		wr.Jobs = []web.Job{}
	}
	return wr, nil
}

// ideURL is a dev environment's IDE deep link (web.IDEURL) for the SSH
// host `hoist attach` names after the run, to the working directory its
// runner reported on starting its latest submission, else to its spec's
// working_dir when that is absolute; "" for other runs and without `ide`.
func ideURL(r store.Run, jobs []store.Job) string {
	if r.Type != "dev-environment" {
		return ""
	}
	var spec struct {
		IDE        string `json:"ide"`
		WorkingDir string `json:"working_dir"`
	}
	if json.Unmarshal(r.Spec, &spec) != nil || spec.IDE == "" {
		return ""
	}
	wd, latest := spec.WorkingDir, -1
	for _, j := range jobs {
		if j.JobNum == 0 && j.ReplicaNum == 0 && j.SubmissionNum > latest {
			latest = j.SubmissionNum
			if rt := j.Runtime(); rt.WorkingDir != "" {
				wd = rt.WorkingDir
			} else {
				wd = spec.WorkingDir
			}
		}
	}
	return web.IDEURL(spec.IDE, r.Name, wd)
}

func sortJobs(js []web.Job) {
	for i := 1; i < len(js); i++ { // insertion sort: few jobs, stable
		for k := i; k > 0 && js[k].SubmittedAt.After(js[k-1].SubmittedAt); k-- {
			js[k], js[k-1] = js[k-1], js[k]
		}
	}
}

// GetJob implements web.JobGetter.
func (v *View) GetJob(ctx context.Context, id string) (web.Job, error) {
	j, err := v.st.GetJob(ctx, id)
	if err != nil {
		return web.Job{}, mapErr(err)
	}
	return jobView(j, nil, workflowNames{}), nil
}

// LastLogSeq implements web.LogTailer.
func (v *View) LastLogSeq(ctx context.Context, jobID string) (int64, error) {
	_, last, err := v.st.LogSize(ctx, jobID)
	return last, err
}

// ReadLogs implements web.Store. Each stored chunk becomes one line, its
// trailing newline removed.
func (v *View) ReadLogs(ctx context.Context, jobID string, afterSeq int64, limit int) ([]web.LogLine, error) {
	ls, err := v.st.ReadLogs(ctx, jobID, afterSeq, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]web.LogLine, len(ls))
	for i, l := range ls {
		text, whole := strings.CutSuffix(string(l.Data), "\n")
		out[i] = web.LogLine{Seq: l.Seq, Time: l.Time, Stream: l.Stream, Text: text, Partial: !whole}
	}
	return out, nil
}

// ListEvents implements web.Store.
func (v *View) ListEvents(ctx context.Context, f web.EventFilter) ([]web.Event, error) {
	es, err := v.st.ListEvents(ctx, store.EventFilter{Project: v.project, ObjectKind: f.Kind, ObjectName: f.Name, Revision: f.Revision, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]web.Event, len(es))
	for i, e := range es {
		out[i] = web.Event{ID: e.ID, Time: e.Time, Kind: e.ObjectKind, Name: e.ObjectName, Revision: e.Revision, Type: e.Type, Message: e.Message}
	}
	return out, nil
}

// ListJobs implements web.Store: jobs still running or finished after
// f.Since, newest first.
func (v *View) ListJobs(ctx context.Context, f web.JobFilter) ([]web.Job, error) {
	js, err := v.st.ListRecentJobs(ctx, f.Since, f.Limit)
	if err != nil {
		return nil, err
	}
	inst, err := v.instances(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Job, 0, len(js))
	names := workflowNames{}
	for _, j := range js {
		out = append(out, jobView(j, inst, names))
	}
	return out, nil
}

// ListRevisions implements web.Store.
func (v *View) ListRevisions(ctx context.Context, limit int) ([]web.Revision, error) {
	rs, err := v.st.ListRevisions(ctx, v.project, limit)
	if err != nil {
		return nil, err
	}
	st, err := v.st.GetSyncState(ctx, v.project)
	if err != nil {
		return nil, err
	}
	out := make([]web.Revision, len(rs))
	for i, r := range rs {
		out[i] = revisionView(r, st.AppliedSHA)
	}
	return out, nil
}

// GetRevision implements web.Store.
func (v *View) GetRevision(ctx context.Context, sha string) (web.Revision, error) {
	r, err := v.st.GetRevision(ctx, v.project, sha)
	if err != nil {
		return web.Revision{}, mapErr(err)
	}
	st, err := v.st.GetSyncState(ctx, v.project)
	if err != nil {
		return web.Revision{}, err
	}
	return revisionView(r, st.AppliedSHA), nil
}

// runWarnings returns the warnings of the run's revision that are about
// the file of the run's resource.
func (v *View) runWarnings(ctx context.Context, r store.Run) []string {
	rev, err := v.st.GetRevision(ctx, v.project, r.Revision)
	if err != nil || len(rev.Warnings) == 0 {
		return nil
	}
	res, err := v.st.GetResource(ctx, v.project, r.ResourceKind, r.ResourceName)
	if err != nil || res.File == "" {
		return nil
	}
	var out []string
	for _, w := range rev.Warnings {
		if strings.HasPrefix(w, res.File+":") {
			out = append(out, w)
		}
	}
	return out
}

func revisionView(r store.Revision, applied string) web.Revision {
	errs := r.Errors
	if errs == nil {
		errs = []string{}
	}
	warns := r.Warnings
	if warns == nil {
		warns = []string{}
	}
	rv := web.Revision{SHA: r.SHA, Message: r.Message, Author: r.Author, CommittedAt: r.CommittedAt,
		SeenAt: r.SeenAt, Valid: r.Valid, Errors: errs, Warnings: warns, Applied: r.SHA == applied}
	var p plan.Plan
	if len(r.Plan) > 0 && json.Unmarshal(r.Plan, &p) == nil {
		wp := PlanView(r.SHA, p)
		rv.Plan = &wp
	}
	return rv
}

// PlanView is a reconciler plan as the web shows it: one change per step,
// with the reason and the changed fields, the spend before and after, and
// whether it is held.
func PlanView(rev string, p plan.Plan) web.Plan {
	out := web.Plan{Revision: rev, Valid: true, Errors: []string{}, Changes: []web.Change{},
		Held: p.Held, HeldReasons: []string{}, CostBefore: p.CostBefore, CostAfter: p.CostAfter, Budget: p.Budget,
		Warnings: append([]string{}, p.Warnings...)}
	if p.Held {
		out.HeldReasons = append(out.HeldReasons, p.HoldReason)
	}
	for _, s := range p.Steps {
		action := string(s.Action)
		if s.Action == plan.Noop {
			action = "none"
		}
		detail := s.Reason
		if len(s.Changed) > 0 {
			detail += " (" + strings.Join(s.Changed, ", ") + ")"
		}
		if s.Cost != "" {
			detail = strings.TrimPrefix(detail+"; estimated "+s.Cost, "; ")
		}
		if s.Program {
			detail = strings.TrimPrefix(detail+"; its provider's program runs first and prints its jobs", "; ")
		}
		if s.ProviderCommit != "" {
			detail = strings.TrimPrefix(detail+"; provider at commit "+source.ShortID(s.ProviderCommit), "; ")
		}
		ch := web.Change{Action: action, Kind: string(s.Kind), Name: s.Name, Detail: detail,
			CostBefore: s.PriceBefore, CostAfter: s.PriceAfter}
		for _, j := range s.Jobs {
			ch.Jobs = append(ch.Jobs, web.ChangeJob{Name: j.Name, Image: j.Image, DependsOn: j.DependsOn, Master: j.Master,
				Artifacts: j.Artifacts, PricePerHour: j.PricePerHour})
		}
		out.Changes = append(out.Changes, ch)
	}
	return out
}

// SyncStatus reads the sync state row for the overview; it
// is the read half of web.Syncer.
func (v *View) SyncStatus(ctx context.Context) (web.SyncStatus, error) {
	st, err := v.st.GetSyncState(ctx, v.project)
	if err != nil {
		return web.SyncStatus{}, err
	}
	out := web.SyncStatus{Status: st.Status, Revision: st.AppliedSHA, LatestRevision: st.LatestSHA,
		Errors: st.Errors, Held: st.Held, HeldReasons: st.HeldReasons, AutoSync: !st.Suspended, LastSyncAt: timePtr(st.LastSyncedAt)}
	if out.Errors == nil {
		out.Errors = []string{}
	}
	return out, nil
}

// LookupToken implements web.Tokens: the token's user with its current
// memberships.
func (v *View) LookupToken(ctx context.Context, token string) (web.Principal, error) {
	u, err := v.st.LookupToken(ctx, token)
	if err != nil {
		return web.Principal{}, mapErr(err)
	}
	return v.principalOf(ctx, u)
}

// ListFleets implements web.Inventory.
func (v *View) ListFleets(ctx context.Context) ([]web.Fleet, error) {
	fs, err := v.st.ListFleets(ctx, store.InfraFilter{Project: v.project})
	if err != nil {
		return nil, err
	}
	is, err := v.st.ListInstances(ctx, store.InfraFilter{Project: v.project})
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, i := range is {
		count[i.FleetID]++
	}
	out := make([]web.Fleet, len(fs))
	for i, f := range fs {
		wf := web.Fleet{Name: f.Name, Status: f.Status, StatusMessage: f.StatusMessage, Revision: f.Revision,
			Instances: count[f.ID], Spec: f.Spec, CreatedAt: f.CreatedAt}
		var spec struct {
			Nodes *struct {
				Min    int  `json:"min"`
				Target int  `json:"target"`
				Max    *int `json:"max"`
			} `json:"nodes"`
			SSHConfig *struct {
				Hosts []json.RawMessage `json:"hosts"`
			} `json:"ssh_config"`
		}
		if json.Unmarshal(f.Spec, &spec) == nil {
			switch {
			case spec.Nodes != nil:
				wf.NodesMin, wf.NodesTarget, wf.NodesMax = spec.Nodes.Min, spec.Nodes.Target, spec.Nodes.Max
			case spec.SSHConfig != nil:
				n := len(spec.SSHConfig.Hosts)
				wf.NodesMin, wf.NodesTarget, wf.NodesMax = n, n, &n
			}
		}
		out[i] = wf
	}
	return out, nil
}

// RunFleetNames implements web.FleetNamer.
func (v *View) RunFleetNames(ctx context.Context) ([]string, error) {
	return v.st.RunFleetNames(ctx, v.project)
}

// ListInstances implements web.Inventory.
func (v *View) ListInstances(ctx context.Context, fleet string) ([]web.Instance, error) {
	f := store.InfraFilter{Project: v.project}
	if fleet != "" {
		fl, err := v.st.GetFleetByName(ctx, v.project, fleet)
		if errors.Is(err, store.ErrNotFound) || err == nil && fl.Deleted {
			return []web.Instance{}, nil
		}
		if err != nil {
			return nil, err
		}
		f.FleetID = fl.ID
	}
	is, err := v.st.ListInstances(ctx, f)
	if err != nil {
		return nil, err
	}
	// The names of the instances' fleets alone: each scrape of /metrics
	// lists the instances, and reading every fleet's row with its spec,
	// or even every fleet's name, cost more than the instances themselves.
	ids := make([]string, len(is))
	for i, in := range is {
		ids[i] = in.FleetID
	}
	fleetNames, err := v.fleetNames(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]web.Instance, 0, len(is))
	for _, i := range is {
		if fleet != "" && i.FleetID != f.FleetID {
			continue
		}
		wi := web.Instance{Name: i.Name, Fleet: fleetNames[i.FleetID], Backend: i.Backend, Region: i.Region,
			Price: i.Price, Status: i.Status, StatusMessage: i.StatusMessage, Reachable: !i.Unreachable,
			LastSeenAt: timePtr(i.LastSeenAt), CreatedAt: i.CreatedAt}
		var o struct {
			Instance    string  `json:"instance"`
			Spot        bool    `json:"spot"`
			CPUs        int     `json:"cpus"`
			MemoryGB    float64 `json:"memory_gb"`
			GPUName     string  `json:"gpu_name"`
			GPUCount    int     `json:"gpu_count"`
			GPUMemoryGB float64 `json:"gpu_memory_gb"`
			DiskGB      float64 `json:"disk_gb"`
		}
		if len(i.Offer) > 0 && json.Unmarshal(i.Offer, &o) == nil {
			wi.InstanceType, wi.Spot = o.Instance, o.Spot
			wi.Resources = resources(o.CPUs, o.MemoryGB, o.GPUCount, o.GPUName, o.GPUMemoryGB, o.DiskGB)
		}
		out = append(out, wi)
	}
	return out, nil
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// resources renders dstack's short resource line: "8xCPU, 32GB, 1xA100 (80GB), 100GB (disk)".
func resources(cpus int, mem float64, gpus int, gpu string, gpuMem, disk float64) string {
	var parts []string
	if cpus > 0 {
		parts = append(parts, fmt.Sprintf("%dxCPU", cpus))
	}
	if mem > 0 {
		parts = append(parts, num(mem)+"GB")
	}
	if gpus > 0 {
		p := fmt.Sprintf("%dx%s", gpus, gpu)
		if gpuMem > 0 {
			p += " (" + num(gpuMem) + "GB)"
		}
		parts = append(parts, p)
	}
	if disk > 0 {
		parts = append(parts, num(disk)+"GB (disk)")
	}
	return strings.Join(parts, ", ")
}

// ListVolumes implements web.Inventory.
func (v *View) ListVolumes(ctx context.Context) ([]web.Volume, error) {
	vs, err := v.st.ListVolumes(ctx, store.InfraFilter{Project: v.project})
	if err != nil {
		return nil, err
	}
	inst, err := v.instances(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Volume, len(vs))
	for i, vol := range vs {
		wv := web.Volume{Name: vol.Name, Backend: vol.Backend, Region: vol.Region, SizeGB: vol.SizeGB,
			Status: vol.Status, StatusMessage: vol.StatusMessage, Revision: vol.Revision, AttachedTo: []string{}, CreatedAt: vol.CreatedAt}
		if as, err := v.st.ListVolumeAttachments(ctx, vol.ID, ""); err == nil {
			for _, a := range as {
				wv.AttachedTo = append(wv.AttachedTo, inst[a.InstanceID].name)
			}
		}
		out[i] = wv
	}
	return out, nil
}

// ListGateways implements web.Inventory.
func (v *View) ListGateways(ctx context.Context) ([]web.Gateway, error) {
	gs, err := v.st.ListGateways(ctx, store.InfraFilter{Project: v.project})
	if err != nil {
		return nil, err
	}
	out := make([]web.Gateway, len(gs))
	for i, g := range gs {
		var spec struct {
			Domain string `json:"domain"`
		}
		_ = json.Unmarshal(g.Spec, &spec)
		out[i] = web.Gateway{Name: g.Name, Backend: g.Backend, Region: g.Region, Domain: spec.Domain, Hostname: g.Hostname,
			IPAddress: g.IPAddress, Status: g.Status, StatusMessage: g.StatusMessage, Revision: g.Revision, CreatedAt: g.CreatedAt}
	}
	return out, nil
}
