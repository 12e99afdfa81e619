package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// MaxWorkflowJobs bounds the jobs one workflow may generate.
const MaxWorkflowJobs = 5000

// ProviderOutputFile is the name program providers' output is reported
// under in errors (ParseProviderOutput).
const ProviderOutputFile = "provider output"

// jobNameRE is what a generated job's name must match.
var jobNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// taskJobKeys are the fields of a generated job that a task has too; they
// are validated and normalized exactly as a task's.
var taskJobKeys = []string{"image", "commands", "env", "ports", "working_dir", "resources"}

// decodeJobs validates and normalizes the jobs a provider generated
// (items, at path p.what) and checks their graph: names unique,
// dependencies and masters known, no cycle.
func decodeJobs(v *validator, items []*node, p, what string) ([]WorkflowJob, Errors) {
	lp := join(p, what)
	var errs Errors
	if len(items) == 0 {
		return nil, Errors{&Error{Pos: Position{}, Path: lp, Msg: lp + ": the provider generated no jobs"}}
	}
	if len(items) > MaxWorkflowJobs {
		return nil, Errors{newError(items[0].pos, lp, "the provider generated %d jobs, more than the limit of %d", len(items), MaxWorkflowJobs)}
	}
	jobs := make([]WorkflowJob, len(items))
	names := map[string]int{}
	for i, it := range items {
		jp := idx(lp, i)
		d := &dec{}
		if it.kind != nMap {
			errs = append(errs, newError(it.pos, jp, "expected a mapping (a job), got %s", it.describe()))
			continue
		}
		if !d.object(it, jp, fieldsAt("#WorkflowJob")...) {
			errs = append(errs, d.errs...)
			continue
		}
		j := &jobs[i]
		j.Name = fmt.Sprintf("job-%d", i)
		if n := it.get("name"); n != nil {
			if s, ok := d.str(n, join(jp, "name")); ok {
				if !jobNameRE.MatchString(s) {
					d.errf(n, join(jp, "name"), "invalid job name %q: must match %s", s, jobNameRE)
				}
				j.Name = s
			}
		}
		if prev, dup := names[j.Name]; dup {
			d.errf(it, jp, "duplicate job name %q: also job %d", j.Name, prev)
		} else {
			names[j.Name] = i
		}
		t, terrs := taskOf(v, it, jp)
		errs = append(errs, terrs...)
		if t != nil {
			j.Image, j.Commands, j.Env, j.Ports, j.WorkingDir, j.Resources = t.Image, t.Commands, t.Env, t.Ports, t.WorkingDir, t.Resources
		}
		if a := it.get("artifacts"); a != nil {
			for k, s := range d.strList(a, join(jp, "artifacts")) {
				c := path.Clean(s)
				if !path.IsAbs(c) && (c == ".." || strings.HasPrefix(c, "../")) {
					d.errf(a.items[k], idx(join(jp, "artifacts"), k), "artifact %q must not leave the working directory", s)
					continue
				}
				j.Artifacts = append(j.Artifacts, c)
			}
		}
		if dn := it.get("depends_on"); dn != nil {
			j.DependsOn = d.strList(dn, join(jp, "depends_on"))
		}
		if m := it.get("master"); m != nil {
			j.Master, _ = d.str(m, join(jp, "master"))
		}
		errs = append(errs, d.errs...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for i, it := range items {
		jp := idx(lp, i)
		for k, dep := range jobs[i].DependsOn {
			if _, ok := names[dep]; !ok {
				errs = append(errs, newError(it.get("depends_on").items[k].pos, idx(join(jp, "depends_on"), k), "unknown job %q", dep))
			} else if dep == jobs[i].Name {
				errs = append(errs, newError(it.get("depends_on").items[k].pos, idx(join(jp, "depends_on"), k), "a job cannot depend on itself"))
			}
		}
		if m := jobs[i].Master; m != "" {
			if _, ok := names[m]; !ok {
				errs = append(errs, newError(it.get("master").pos, join(jp, "master"), "unknown job %q", m))
			} else if m == jobs[i].Name {
				errs = append(errs, newError(it.get("master").pos, join(jp, "master"), "a job cannot be its own master"))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if cyc := jobCycle(jobs, names); cyc != nil {
		first := names[cyc[0]]
		return nil, Errors{newError(items[first].pos, idx(lp, first), "the jobs' depends_on form a cycle: %s", strings.Join(cyc, " → "))}
	}
	return jobs, nil
}

// taskOf validates the task fields of a generated job as a task's and
// returns the normalized task, its errors named by the job's path.
func taskOf(v *validator, it *node, jp string) (*Task, Errors) {
	doc := &node{kind: nMap, pos: it.pos,
		keys: []*node{{kind: nString, str: "type", pos: it.pos}, {kind: nString, str: "name", pos: it.pos}},
		vals: []*node{{kind: nString, str: string(KindTask), pos: it.pos}, {kind: nString, str: "job", pos: it.pos}}}
	for i, k := range it.keys {
		if contains(taskJobKeys, k.str) {
			doc.keys = append(doc.keys, k)
			doc.vals = append(doc.vals, it.vals[i])
		}
	}
	r, errs := v.document(context.Background(), doc, it.pos.File, "job")
	for _, e := range errs {
		full := jp
		if e.Path != "" {
			full = jp + "." + e.Path
		}
		if e.Path != "" && strings.HasPrefix(e.Msg, e.Path+": ") {
			e.Msg = full + ": " + strings.TrimPrefix(e.Msg, e.Path+": ")
		} else {
			e.Msg = full + ": " + e.Msg
		}
		e.Path = full
	}
	if r == nil {
		return nil, errs
	}
	return r.Spec.(*Task), errs
}

// jobCycle returns the names along one cycle of depends_on (the first
// name repeated at the end), or nil.
func jobCycle(jobs []WorkflowJob, names map[string]int) []string {
	const (
		unseen = iota
		active
		finished
	)
	state := make([]int, len(jobs))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = active
		stack = append(stack, i)
		for _, dep := range jobs[i].DependsOn {
			k := names[dep]
			switch state[k] {
			case active:
				for s := len(stack) - 1; s >= 0; s-- {
					if stack[s] == k {
						for _, x := range stack[s:] {
							cycle = append(cycle, jobs[x].Name)
						}
						cycle = append(cycle, jobs[k].Name)
						return true
					}
				}
			case unseen:
				if visit(k) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = finished
		return false
	}
	for i := range jobs {
		if state[i] == unseen && visit(i) {
			return cycle
		}
	}
	return nil
}

// ParseProviderOutput reads what a program provider printed: a JSON or
// YAML list of jobs (see WorkflowJob). Errors name the output's line and
// column (file ProviderOutputFile) and the job's field.
func ParseProviderOutput(out []byte) ([]WorkflowJob, error) {
	if len(out) > MaxFileBytes {
		return nil, Errors{&Error{Pos: Position{File: ProviderOutputFile, Line: 1, Column: 1},
			Msg: fmt.Sprintf("the output is %s, more than the limit of %s", byteSize(int64(len(out))), byteSize(MaxFileBytes))}}
	}
	doc, perr := parseYAML(ProviderOutputFile, out)
	if perr != nil {
		return nil, Errors{perr}
	}
	if e := checkSizes(doc); e != nil {
		return nil, Errors{e}
	}
	if doc.kind != nList {
		return nil, Errors{newError(doc.pos, "", "expected a list of jobs, got %s", doc.describe())}
	}
	v := validators.Get().(*validator)
	defer validators.Put(v)
	jobs, errs := decodeJobs(v, doc.items, "", "jobs")
	if len(errs) > 0 {
		for _, e := range errs {
			if e.Pos == (Position{}) {
				e.Pos = doc.pos
			}
		}
		errs.Sort()
		return nil, errs
	}
	return jobs, nil
}

// WorkflowJSON is a workflow's canonical JSON (Resource.JSON).
func WorkflowJSON(wf *Workflow) []byte { return canonicalJSON(KindWorkflow, wf) }

// WithJobs returns r with its workflow's jobs set (a program provider's,
// from its output) and its JSON recomputed.
func WithJobs(r Resource, jobs []WorkflowJob) Resource {
	wf := *r.Spec.(*Workflow)
	wf.Jobs = jobs
	r.Spec, r.JSON = &wf, WorkflowJSON(&wf)
	return r
}

// NeedsProvider reports whether r is a workflow whose provider is in
// another repository and not read yet (see ResolveWorkflow).
func (r Resource) NeedsProvider() bool { return r.pending != nil }

// ResolveWorkflow reads the provider of workflow r from another
// repository's files (remote, at commit) and completes r as Load does a
// workflow of a local provider: its parameters checked against the
// provider's schema, and its jobs or program. spec is the spec
// repository's revision, whose files a program provider's inputs name.
// Errors are at the workflow's position.
func ResolveWorkflow(r *Resource, spec, remote fs.FS, commit string) Errors {
	pw := r.pending
	if pw == nil {
		return nil
	}
	wf := *r.Spec.(*Workflow)
	wf.Provider.Commit = commit
	at := func(format string, args ...any) Errors {
		return Errors{newError(pw.it.pos, join(pw.path, "provider"), format, args...)}
	}
	where := fmt.Sprintf("%s (commit %.12s)", wf.Provider.Repo, commit)
	v := validators.Get().(*validator)
	defer validators.Put(v)
	w := newWfLoader(v, remote)
	if !exists(remote, ProvidersFile) {
		return at("%s has no %s", where, ProvidersFile)
	}
	if doc := w.file(ProvidersFile); doc != nil {
		w.providers(doc, w.provs)
	}
	if len(w.errs) > 0 {
		w.errs.Sort()
		return at("the providers of %s are invalid: %s", where, w.errs[0].Error())
	}
	pr := w.provs[wf.Provider.Name]
	if pr == nil {
		return at("%s defines no provider %q", where, wf.Provider.Name)
	}
	d := &dec{}
	if pr.hasSchema {
		w.params(d, pr, pw.it, pw.params, pw.path)
	}
	if len(d.errs) > 0 {
		return d.errs
	}
	w.fsys = spec
	if errs := w.expand(&wf, pr, pw.it, pw.path, pw.params, commit); len(errs) > 0 {
		return errs
	}
	r.Spec, r.JSON, r.pending = &wf, WorkflowJSON(&wf), nil
	return nil
}

// canonicalValue renders a node as JSON with sorted keys.
func canonicalValue(n *node) json.RawMessage {
	b, err := json.Marshal(nodeValue(n))
	if err != nil {
		panic(fmt.Sprintf("schema: encode value: %v", err))
	}
	return b
}

// nodeValue converts a node to plain Go values.
func nodeValue(n *node) any {
	switch n.kind {
	case nBool:
		return n.b
	case nInt:
		return n.i
	case nFloat:
		return n.f
	case nString:
		return n.str
	case nList:
		out := make([]any, len(n.items))
		for i, it := range n.items {
			out[i] = nodeValue(it)
		}
		return out
	case nMap:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k.str] = nodeValue(n.vals[i])
		}
		return out
	}
	return nil
}
