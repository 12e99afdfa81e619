package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/encoding/jsonschema"
)

// The files of dstack's custom providers (dstack 0.0.x), read at the
// loaded root only, as dstack read them at the repository's root.
const (
	ProvidersFile = ".dstack/providers.yaml"
	WorkflowsFile = ".dstack/workflows.yaml"
)

// isWorkflowFile reports whether p is one of dstack's provider or workflow
// files.
func isWorkflowFile(p string) bool { return p == ProvidersFile || p == WorkflowsFile }

// workflowKeys are the workflow fields dstack kept for itself; every other
// field is a parameter of the provider (dstack's `workflow.data`).
var workflowKeys = []string{"name", "provider", "depends-on"}

// provider is one decoded provider.
type provider struct {
	name string
	pos  Position
	kind string // ProviderKindProgram or ProviderKindCUE
	// A program provider's container and the paths it reads.
	program *ProviderProgram
	inputs  []string
	// A CUE provider's source and where it is.
	cueSrc string
	cuePos Position
	// schema is the compiled parameter schema; schemaDoc its source, for
	// naming allowed values.
	schema    cue.Value
	schemaDoc *node
	hasSchema bool
	// schemaFile is the schema's path when it is a file.
	schemaFile string
	// broken is set when the provider itself is invalid (reported once,
	// at the provider).
	broken bool
}

// pendingWorkflow is what resolving a workflow of another repository's
// provider needs (ResolveWorkflow): its mapping, path and parameters.
type pendingWorkflow struct {
	it     *node
	path   string
	params *node
}

// loadWorkflows loads the providers and workflows among files (see
// ProvidersFile, WorkflowsFile) and the top-level `providers` and
// `workflows` lists of CUE specs (cue). Providers form one name space.
// Each valid workflow is a resource of KindWorkflow; one whose provider
// is in another repository waits for ResolveWorkflow.
func loadWorkflows(v *validator, fsys fs.FS, files []string, cue []cueDoc) (res []Resource, errs Errors) {
	var wantProv, wantWf bool
	for _, f := range files {
		wantProv = wantProv || f == ProvidersFile
		wantWf = wantWf || f == WorkflowsFile
	}
	var cueProv, cueWf []*node
	var cueProvFile, cueWfFile []string
	for _, d := range cue {
		// d.node is the list; wrap it as the root mapping of a file.
		root := &node{kind: nMap, pos: d.node.pos, keys: []*node{{kind: nString, str: d.wf, pos: d.node.pos}}, vals: []*node{d.node}}
		if d.wf == "providers" {
			cueProv, cueProvFile = append(cueProv, root), append(cueProvFile, d.node.pos.File)
		} else {
			cueWf, cueWfFile = append(cueWf, root), append(cueWfFile, d.node.pos.File)
		}
	}
	if !wantProv && !wantWf && len(cue) == 0 {
		return nil, nil
	}
	w := newWfLoader(v, fsys)
	defer func() {
		if r := recover(); r != nil {
			// CUE's JSON-Schema support must never take the daemon down
			// on user input.
			file := WorkflowsFile
			if wantProv {
				file = ProvidersFile
			}
			res, errs = nil, append(w.errs, &Error{Pos: Position{File: file, Line: 1, Column: 1},
				Msg: fmt.Sprintf("internal error loading custom providers and workflows: %v", r)})
		}
	}()
	// The providers file is read whenever workflows are, to resolve names.
	if wantProv || ((wantWf || len(cueWf) > 0) && exists(fsys, ProvidersFile)) {
		if doc := w.file(ProvidersFile); doc != nil {
			w.providers(doc, w.provs)
		}
	}
	for _, doc := range cueProv {
		w.providers(doc, w.provs)
	}
	if wantWf {
		if doc := w.file(WorkflowsFile); doc != nil {
			w.workflows(doc, WorkflowsFile)
		}
	}
	for i, doc := range cueWf {
		w.workflows(doc, cueWfFile[i])
	}
	return w.res, w.errs
}

func exists(fsys fs.FS, p string) bool {
	info, err := fs.Stat(fsys, p)
	return err == nil && info.Mode().IsRegular()
}

type wfLoader struct {
	v     *validator
	fsys  fs.FS
	ctx   *cue.Context
	provs map[string]*provider
	seen  map[string]Position // workflow names
	res   []Resource
	errs  Errors
}

func newWfLoader(v *validator, fsys fs.FS) *wfLoader {
	return &wfLoader{v: v, fsys: fsys, ctx: cuecontext.New(), provs: map[string]*provider{}, seen: map[string]Position{}}
}

// file reads and parses one file, checking the size limits; nil on error.
func (w *wfLoader) file(p string) *node {
	b, err := readSpec(w.fsys, p)
	if err != nil {
		w.errs = append(w.errs, err)
		return nil
	}
	doc, perr := parseYAML(p, b)
	if perr != nil {
		w.errs = append(w.errs, perr)
		return nil
	}
	if e := checkSizes(doc); e != nil {
		w.errs = append(w.errs, e)
		return nil
	}
	return doc
}

// list decodes the file's root mapping {key: [items]}.
func (w *wfLoader) list(doc *node, key string) []*node {
	d := &dec{}
	defer func() { w.errs = append(w.errs, d.errs...) }()
	if doc.kind != nMap {
		d.errf(doc, "", "expected a mapping with a %q list, got %s", key, doc.describe())
		return nil
	}
	if !d.object(doc, "", key) {
		return nil
	}
	l := doc.get(key)
	switch {
	case l == nil:
		d.errf(doc, "", "field %q is required", key)
		return nil
	case l.kind != nList:
		d.errf(l, key, "expected a list, got %s", l.describe())
		return nil
	}
	return l.items
}

// providers decodes a {providers: [...]} document into provs, compiling
// each provider's schema.
func (w *wfLoader) providers(doc *node, provs map[string]*provider) {
	for i, it := range w.list(doc, "providers") {
		p := idx("providers", i)
		d := &dec{}
		if !d.object(it, p, fieldsAt("#Provider")...) && it.kind != nMap {
			w.errs = append(w.errs, d.errs...)
			continue
		}
		name := w.required(d, it, p, "name")
		pr := &provider{name: name, pos: it.pos}
		if c := it.get("cue"); c != nil {
			pr.kind = ProviderKindCUE
			for _, k := range []string{"image", "commands", "inputs"} {
				if n := it.get(k); n != nil {
					d.errf(n, join(p, k), "a CUE provider (`cue`) has no %s: %s belongs to a program provider", k, k)
				}
			}
			if src, ok := d.str(c, join(p, "cue")); ok {
				pr.cueSrc, pr.cuePos = src, c.pos
				w.checkCUE(d, pr, join(p, "cue"))
			}
		} else {
			pr.kind = ProviderKindProgram
			prog := &ProviderProgram{Image: w.required(d, it, p, "image")}
			if c := it.get("commands"); c == nil {
				d.errf(it, p, "field %q is required (or `cue` for a CUE provider)", "commands")
			} else {
				n := len(d.errs)
				if prog.Commands = d.strList(c, join(p, "commands")); len(prog.Commands) == 0 && len(d.errs) == n {
					d.errf(c, join(p, "commands"), "at least one command is required")
				}
			}
			pr.program = prog
			if in := it.get("inputs"); in != nil {
				for j, s := range d.strList(in, join(p, "inputs")) {
					f := path.Clean(s)
					if path.IsAbs(f) || f == ".." || strings.HasPrefix(f, "../") {
						d.errf(in.items[j], idx(join(p, "inputs"), j), "input %q must be a path inside the repository", s)
						continue
					}
					pr.inputs = append(pr.inputs, f)
				}
			}
		}
		if s := it.get("schema"); s != nil {
			w.compile(d, pr, s, join(p, "schema"))
		}
		w.errs = append(w.errs, d.errs...)
		pr.broken = pr.broken || len(d.errs) > 0
		if name == "" {
			continue
		}
		if prev, dup := provs[name]; dup {
			w.errs = append(w.errs, newError(it.get("name").pos, join(p, "name"),
				"duplicate provider name %q: also defined at %s", name, prev.pos))
			continue
		}
		provs[name] = pr
	}
}

// checkCUE compiles a CUE provider's source once, so that a syntax error
// is reported at the provider even when no workflow uses it.
func (w *wfLoader) checkCUE(d *dec, pr *provider, p string) {
	v := w.ctx.CompileString(pr.cueSrc, cue.Filename(pr.name+".cue"))
	if err := v.Err(); err != nil {
		d.errs = append(d.errs, newError(pr.cuePos, p, "invalid CUE: %s", cueMsg(err)))
		pr.broken = true
	}
}

// cueMsg flattens a CUE error to one line, each error followed by where
// it is (a provider's source is named "<provider>.cue").
func cueMsg(err error) string {
	var parts []string
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		m := fmt.Sprintf(format, args...)
		if p := e.Position(); p.IsValid() {
			m += fmt.Sprintf(" (%s line %d, column %d)", path.Base(p.Filename()), p.Line(), p.Column())
		}
		parts = append(parts, m)
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return strings.Join(parts, "; ")
}

// required decodes a required non-empty string field of it.
func (w *wfLoader) required(d *dec, it *node, p, key string) string {
	n := it.get(key)
	if n == nil {
		d.errf(it, p, "field %q is required", key)
		return ""
	}
	s, ok := d.str(n, join(p, key))
	if ok && s == "" {
		d.errf(n, join(p, key), "must not be empty")
	}
	return s
}

// compile reads a provider's parameter schema (a file path or inline) and
// compiles it with CUE's JSON-Schema support.
func (w *wfLoader) compile(d *dec, pr *provider, s *node, p string) {
	src := s
	switch s.kind {
	case nString:
		f := path.Clean(s.str)
		if path.IsAbs(f) || f == ".." || strings.HasPrefix(f, "../") {
			d.errf(s, p, "schema file %q must be a path inside the repository", s.str)
			return
		}
		pr.schemaFile = f
		if !exists(w.fsys, f) {
			d.errf(s, p, "schema file %q not found in the repository", s.str)
			return
		}
		if src = w.file(f); src == nil {
			return
		}
	case nMap:
	default:
		d.errf(s, p, "expected a schema file path or an inline JSON Schema mapping, got %s", s.describe())
		return
	}
	v := w.ctx.BuildExpr(toAST(src))
	f, err := jsonschema.Extract(v, &jsonschema.Config{})
	if err == nil {
		pr.schema = w.ctx.BuildFile(f)
		err = pr.schema.Err()
	}
	if err != nil {
		d.errf(s, p, "invalid JSON Schema: %s", cueMsg(err))
		return
	}
	pr.schemaDoc, pr.hasSchema = src, true
}

// workflows decodes a {workflows: [...]} document of file into resources.
func (w *wfLoader) workflows(doc *node, file string) {
	for i, it := range w.list(doc, "workflows") {
		p := idx("workflows", i)
		d := &dec{}
		if it.kind != nMap {
			d.errf(it, p, "expected a mapping, got %s", it.describe())
			w.errs = append(w.errs, d.errs...)
			continue
		}
		name := w.required(d, it, p, "name")
		if name != "" {
			if !ValidName(name) {
				d.errf(it.get("name"), join(p, "name"), "invalid name %q: a workflow is a run, its name must match ^[a-z][a-z0-9-]{1,40}$", name)
			} else if prev, dup := w.seen[name]; dup {
				d.errf(it.get("name"), join(p, "name"), "duplicate workflow name %q: also defined at %s", name, prev)
			} else {
				w.seen[name] = it.get("name").pos
			}
		}
		if dep := it.get("depends-on"); dep != nil {
			d.errf(dep, join(p, "depends-on"), "hoist does not order workflows after one another: give the provider's jobs `depends_on` within one workflow instead")
		}
		params := paramsOf(it)
		wf := &Workflow{}
		pr := w.provider(d, it, p, wf)
		if pr != nil && pr.hasSchema {
			w.params(d, pr, it, params, p)
		}
		if len(d.errs) > 0 || (pr != nil && pr.broken) {
			w.errs = append(w.errs, d.errs...)
			continue
		}
		r, errs := w.workflow(name, file, it, p, params, wf, pr)
		if len(errs) > 0 {
			w.errs = append(w.errs, errs...)
			continue
		}
		w.res = append(w.res, r)
	}
}

// paramsOf returns a workflow's parameters: every field but workflowKeys.
func paramsOf(it *node) *node {
	params := &node{kind: nMap, pos: it.pos}
	for i, k := range it.keys {
		if !contains(workflowKeys, k.str) {
			params.keys = append(params.keys, k)
			params.vals = append(params.vals, it.vals[i])
		}
	}
	return params
}

// workflow builds the resource of one workflow: its run defaults, its
// parameters, and its jobs (a local CUE provider's) or its program (a
// local program provider's). pr is nil for a provider of another
// repository, resolved later by ResolveWorkflow.
func (w *wfLoader) workflow(name, file string, it *node, p string, params *node, wf *Workflow, pr *provider) (Resource, Errors) {
	// A workflow's run takes a task's defaults: its profile and the
	// resources a program provider's container asks for.
	base := &node{kind: nMap, pos: it.pos,
		keys: []*node{{kind: nString, str: "type"}, {kind: nString, str: "name"}, {kind: nString, str: "commands"}},
		vals: []*node{{kind: nString, str: string(KindTask)}, {kind: nString, str: name}, {kind: nList, items: []*node{{kind: nString, str: "true"}}}}}
	d := &dec{}
	wf.RunConfig = d.runConfig(base, KindTask)
	wf.Params = canonicalValue(params)
	r := Resource{Kind: KindWorkflow, Name: name, File: file, Pos: it.pos, Spec: wf, doc: it}
	if pr == nil {
		r.pending = &pendingWorkflow{it: it, path: p, params: params}
		r.JSON = WorkflowJSON(wf)
		return r, nil
	}
	if errs := w.expand(wf, pr, it, p, params, ""); len(errs) > 0 {
		return Resource{}, errs
	}
	r.JSON = WorkflowJSON(wf)
	if len(r.JSON) > MaxResourceBytes {
		return Resource{}, Errors{newError(it.pos, p, "the workflow's %d jobs come to %s, more than the limit of %s per resource",
			len(wf.Jobs), byteSize(int64(len(r.JSON))), byteSize(MaxResourceBytes))}
	}
	return r, nil
}

// expand fills a workflow from its resolved provider: a CUE provider's
// jobs, or a program provider's program and input hash. commit is the
// provider repository's commit ("" for the spec repository's).
func (w *wfLoader) expand(wf *Workflow, pr *provider, it *node, p string, params *node, commit string) Errors {
	wf.Provider.Kind = pr.kind
	switch pr.kind {
	case ProviderKindCUE:
		items, errs := w.evalCUE(pr, params, it, p)
		if len(errs) > 0 {
			return errs
		}
		jobs, errs := decodeJobs(w.v, items, p, "jobs")
		if len(errs) > 0 {
			return errs
		}
		wf.Jobs = jobs
	default:
		wf.Program = pr.program
		h, err := w.inputHash(wf, pr, commit)
		if err != nil {
			return Errors{newError(it.pos, p, "read provider %s's inputs: %v", pr.name, err)}
		}
		wf.InputHash = h
	}
	return nil
}

// evalCUE evaluates a CUE provider on a workflow's parameters and returns
// its `jobs` as nodes, placed at the workflow (the generated jobs have no
// position of their own in the repository).
func (w *wfLoader) evalCUE(pr *provider, params *node, it *node, p string) ([]*node, Errors) {
	v := w.ctx.CompileString(pr.cueSrc, cue.Filename(pr.name+".cue"))
	if err := v.Err(); err != nil {
		return nil, Errors{newError(it.pos, p, "provider %s: invalid CUE: %s", pr.name, cueMsg(err))}
	}
	v = v.FillPath(cue.ParsePath("parameters"), w.ctx.BuildExpr(toAST(params)))
	jobs := v.LookupPath(cue.ParsePath("jobs"))
	if !jobs.Exists() {
		return nil, Errors{newError(it.pos, p, "provider %s defines no `jobs`", pr.name)}
	}
	if err := jobs.Validate(cue.Concrete(true)); err != nil {
		return nil, Errors{newError(it.pos, p, "provider %s: jobs: %s", pr.name, cueMsg(err))}
	}
	b, err := jobs.MarshalJSON()
	if err != nil {
		return nil, Errors{newError(it.pos, p, "provider %s: jobs: %s", pr.name, cueMsg(err))}
	}
	n, perr := parseYAML(it.pos.File, b)
	if perr != nil {
		return nil, Errors{newError(it.pos, p, "provider %s: jobs: %s", pr.name, perr.Msg)}
	}
	setPos(n, it.pos)
	if n.kind != nList {
		return nil, Errors{newError(it.pos, p, "provider %s: jobs must be a list, got %s", pr.name, n.describe())}
	}
	return n.items, nil
}

// setPos places every node of a tree at pos.
func setPos(n *node, pos Position) {
	n.pos = pos
	for _, k := range n.keys {
		setPos(k, pos)
	}
	for _, c := range n.vals {
		setPos(c, pos)
	}
	for _, c := range n.items {
		setPos(c, pos)
	}
}

// inputHash hashes what a program provider reads: the provider (its
// repository's commit, container and schema), the workflow (name and
// parameters) and the content of the provider's inputs in the spec
// repository (all of it when it names none).
func (w *wfLoader) inputHash(wf *Workflow, pr *provider, commit string) (string, error) {
	h := sha256.New()
	head, _ := json.Marshal(struct {
		Provider WorkflowProvider `json:"provider"`
		Commit   string           `json:"commit"`
		Program  *ProviderProgram `json:"program"`
		Schema   json.RawMessage  `json:"schema,omitempty"`
		Name     string           `json:"name"`
		Params   json.RawMessage  `json:"params"`
	}{wf.Provider, commit, pr.program, schemaJSON(pr), wf.Name, wf.Params})
	h.Write(head)
	inputs := pr.inputs
	if len(inputs) == 0 {
		inputs = []string{"."}
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		err := fs.WalkDir(w.fsys, in, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || seen[p] || !d.Type().IsRegular() {
				return nil
			}
			seen[p] = true
			b, err := fs.ReadFile(w.fsys, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			fmt.Fprintf(h, "%s\x00%x\n", p, sum)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("input %s: %w", in, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// schemaJSON is a provider's parameter schema as JSON, for hashing.
func schemaJSON(pr *provider) json.RawMessage {
	if !pr.hasSchema {
		return nil
	}
	return canonicalValue(pr.schemaDoc)
}

// provider resolves a workflow's provider: a local one, or nil for one of
// another repository (recorded in wf.Provider).
func (w *wfLoader) provider(d *dec, it *node, p string, wf *Workflow) *provider {
	pn := it.get("provider")
	pp := join(p, "provider")
	switch {
	case pn == nil:
		d.errf(it, p, "field %q is required (hoist knows workflows of custom providers only)", "provider")
	case pn.kind == nMap:
		d.object(pn, pp, "repo", "name", "ref")
		wf.Provider.Repo = w.required(d, pn, pp, "repo")
		wf.Provider.Name = w.required(d, pn, pp, "name")
		if r := pn.get("ref"); r != nil {
			wf.Provider.Ref = w.required(d, pn, pp, "ref")
		}
	default:
		name, ok := d.str(pn, pp)
		if !ok {
			return nil
		}
		wf.Provider.Name = name
		if pr := w.provs[name]; pr != nil {
			return pr
		}
		d.errf(pn, pp, "unknown provider %q: not defined in %s nor in a CUE spec's `providers` (dstack's built-in providers are not available in hoist)", name, ProvidersFile)
	}
	return nil
}

// params unifies a workflow's parameters (paramsOf its mapping it) with
// its provider's schema.
func (w *wfLoader) params(d *dec, pr *provider, it, params *node, p string) {
	// CUE stops reporting a struct's closedness and required fields once
	// a value in it fails, so the top level's are checked here: users see
	// every problem of the workflow at once.
	root := pr.schemaDoc
	if req := root.get("required"); req != nil && req.kind == nList {
		for _, r := range req.items {
			if r.kind == nString && params.get(r.str) == nil {
				d.errf(it, p, "field %q is required by provider %s's schema", r.str, pr.name)
			}
		}
	}
	if ap := root.get("additionalProperties"); ap != nil && ap.kind == nBool && !ap.b && root.get("patternProperties") == nil {
		props := schemaProps(root, nil)
		for _, k := range params.keys {
			if !contains(props, k.str) {
				m := fmt.Sprintf("field %q not allowed by provider %s's schema", k.str, pr.name)
				if s := suggest(k.str, props); s != "" {
					m += fmt.Sprintf(" (did you mean %q?)", s)
				}
				d.errs = append(d.errs, newError(k.pos, join(p, k.str), "%s", m))
			}
		}
	}
	v := pr.schema.Unify(w.ctx.BuildExpr(toAST(params)))
	err := v.Validate(cue.Concrete(true))
	if err == nil {
		return
	}
	var out Errors
	for _, e := range cueerrors.Errors(err) {
		cp := e.Path()
		target, parent, key := locate(params, cp)
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		full := p
		for _, s := range cp {
			if _, err := strconv.Atoi(s); err == nil {
				full += "[" + s + "]"
			} else {
				full = join(full, s)
			}
		}
		switch {
		case strings.Contains(msg, "field not allowed") && parent != nil:
			at := parent
			if k := parent.keyNode(key); k != nil {
				at = k
			}
			m := fmt.Sprintf("field %q not allowed by provider %s's schema", key, pr.name)
			if s := suggest(key, schemaProps(pr.schemaDoc, cp[:len(cp)-1])); s != "" {
				m += fmt.Sprintf(" (did you mean %q?)", s)
			}
			out = append(out, newError(at.pos, full, "%s", m))
		case target == nil && parent != nil:
			parentPath := strings.TrimSuffix(strings.TrimSuffix(full, key), ".")
			out = append(out, newError(parent.pos, parentPath, "field %q is required by provider %s's schema", key, pr.name))
		default:
			if target == nil {
				target = params
			}
			out = append(out, newError(target.pos, full, "%s", paramMsg(msg, target, pr.schemaDoc, cp)))
		}
	}
	d.errs = append(d.errs, dropAncestors(dedupeByPos(out))...)
}

// paramMsg rewrites CUE's message for a parameter value in the terms of
// the JSON Schema: the allowed values of an enum, the expected type.
func paramMsg(msg string, target *node, sdoc *node, path []string) string {
	s := schemaAt(sdoc, path)
	if e := s.get("enum"); e != nil && e.kind == nList {
		vals := make([]string, len(e.items))
		for i, it := range e.items {
			vals[i] = jsonText(it)
		}
		return fmt.Sprintf("invalid value %s: must be one of %s", jsonText(target), strings.Join(vals, ", "))
	}
	if t := s.get("type"); t != nil && (strings.Contains(msg, "conflicting values") || strings.Contains(msg, "mismatched types") || strings.Contains(msg, "empty disjunction")) {
		want := t.scalarText()
		if t.kind == nList {
			ts := make([]string, len(t.items))
			for i, it := range t.items {
				ts[i] = it.scalarText()
			}
			want = strings.Join(ts, " or ")
		}
		return fmt.Sprintf("invalid value %s (%s): want %s", jsonText(target), target.describe(), want)
	}
	return cleanMsg(msg)
}

// jsonText shows a value as JSON Schema sees it: strings quoted, numbers
// and booleans bare, mappings and lists by kind.
func jsonText(n *node) string {
	switch n.kind {
	case nString:
		return strconv.Quote(n.str)
	case nMap, nList:
		return n.kind.String()
	}
	return n.scalarText()
}

// schemaAt follows a value path through a JSON Schema's properties and
// items; nil when the schema does not say.
func schemaAt(s *node, path []string) *node {
	for _, p := range path {
		if s == nil || s.kind != nMap {
			return nil
		}
		if _, err := strconv.Atoi(p); err == nil {
			s = s.get("items")
			continue
		}
		s = s.get("properties").get(p)
	}
	return s
}

// schemaProps lists the properties a JSON Schema names at path.
func schemaProps(s *node, path []string) []string {
	props := schemaAt(s, path).get("properties")
	if props == nil {
		return nil
	}
	out := make([]string, len(props.keys))
	for i, k := range props.keys {
		out[i] = k.str
	}
	return out
}

// ProviderFiles names the files besides the spec files that loading the
// providers of fsys's ProvidersFile reads: each provider's schema file,
// and the paths (files or folders) a program provider's `inputs` name;
// all is set when a program provider names no inputs (its input hash
// covers every file). A caller sending a revision's files elsewhere (`hoist
// plan`) sends these too. Providers that do not load name nothing
// (loading them reports why).
func ProviderFiles(fsys fs.FS) (paths []string, all bool) {
	if !exists(fsys, ProvidersFile) {
		return nil, false
	}
	v := validators.Get().(*validator)
	defer validators.Put(v)
	w := newWfLoader(v, fsys)
	if doc := w.file(ProvidersFile); doc != nil {
		w.providers(doc, w.provs)
	}
	for _, pr := range w.provs {
		if pr.schemaFile != "" {
			paths = append(paths, pr.schemaFile)
		}
		if pr.kind == ProviderKindProgram {
			all = all || len(pr.inputs) == 0
			paths = append(paths, pr.inputs...)
		}
	}
	sort.Strings(paths)
	return paths, all
}
