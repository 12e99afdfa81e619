package schema

import (
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
	// schema is the compiled parameter schema; schemaDoc its source, for
	// naming allowed values.
	schema    cue.Value
	schemaDoc *node
	hasSchema bool
}

// loadWorkflows validates the providers and workflows among files (see
// ProvidersFile, WorkflowsFile) and the top-level `providers` and
// `workflows` lists of CUE specs (cue). Providers form one name space.
// hoist does not run workflows yet, so a valid workflow is refused with
// one error at its position; with no workflow at all, each valid provider
// is refused the same way.
func loadWorkflows(fsys fs.FS, files []string, cue []cueDoc) (errs Errors) {
	var wantProv, wantWf bool
	for _, f := range files {
		wantProv = wantProv || f == ProvidersFile
		wantWf = wantWf || f == WorkflowsFile
	}
	var cueProv, cueWf []*node
	for _, d := range cue {
		// d.node is the list; wrap it as the root mapping of a file.
		root := &node{kind: nMap, pos: d.node.pos, keys: []*node{{kind: nString, str: d.wf, pos: d.node.pos}}, vals: []*node{d.node}}
		if d.wf == "providers" {
			cueProv = append(cueProv, root)
		} else {
			cueWf = append(cueWf, root)
		}
	}
	if !wantProv && !wantWf && len(cue) == 0 {
		return nil
	}
	w := &wfLoader{fsys: fsys, ctx: cuecontext.New(), provs: map[string]*provider{}, seen: map[string]Position{}}
	defer func() {
		if r := recover(); r != nil {
			// CUE's JSON-Schema support must never take the daemon down
			// on user input.
			file := WorkflowsFile
			if wantProv {
				file = ProvidersFile
			}
			errs = append(w.errs, &Error{Pos: Position{File: file, Line: 1, Column: 1},
				Msg: fmt.Sprintf("internal error validating custom providers and workflows: %v", r)})
		}
	}()
	// The providers file is read whenever workflows are, to resolve names.
	if wantProv || ((wantWf || len(cueWf) > 0) && exists(fsys, ProvidersFile)) {
		if doc := w.file(ProvidersFile); doc != nil {
			w.providers(doc)
		}
	}
	for _, doc := range cueProv {
		w.providers(doc)
	}
	nWorkflows := 0
	if wantWf {
		if doc := w.file(WorkflowsFile); doc != nil {
			nWorkflows += w.workflows(doc)
		}
	}
	for _, doc := range cueWf {
		nWorkflows += w.workflows(doc)
	}
	if nWorkflows == 0 && len(w.errs) == 0 {
		provs := make([]*provider, 0, len(w.provs))
		for _, pr := range w.provs {
			provs = append(provs, pr)
		}
		sort.Slice(provs, func(i, j int) bool { return provs[i].name < provs[j].name })
		for _, pr := range provs {
			w.errs = append(w.errs, &Error{Pos: pr.pos,
				Msg: fmt.Sprintf("provider %s: hoist validates providers but does not run workflows yet (custom providers)", pr.name)})
		}
	}
	return w.errs
}

func exists(fsys fs.FS, p string) bool {
	info, err := fs.Stat(fsys, p)
	return err == nil && info.Mode().IsRegular()
}

type wfLoader struct {
	fsys  fs.FS
	ctx   *cue.Context
	provs map[string]*provider
	seen  map[string]Position // workflow names
	errs  Errors
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

// providers decodes a {providers: [...]} document, compiling each
// provider's schema.
func (w *wfLoader) providers(doc *node) {
	for i, it := range w.list(doc, "providers") {
		p := idx("providers", i)
		d := &dec{}
		if !d.object(it, p, fieldsAt("#Provider")...) && it.kind != nMap {
			w.errs = append(w.errs, d.errs...)
			continue
		}
		name := w.required(d, it, p, "name")
		w.required(d, it, p, "image")
		if c := it.get("commands"); c == nil {
			d.errf(it, p, "field %q is required", "commands")
		} else if n := len(d.errs); len(d.strList(c, join(p, "commands"))) == 0 && len(d.errs) == n {
			d.errf(c, join(p, "commands"), "at least one command is required")
		}
		pr := &provider{name: name, pos: it.pos}
		if s := it.get("schema"); s != nil {
			w.compile(d, pr, s, join(p, "schema"))
		}
		w.errs = append(w.errs, d.errs...)
		if name == "" {
			continue
		}
		if prev, dup := w.provs[name]; dup {
			w.errs = append(w.errs, newError(it.get("name").pos, join(p, "name"),
				"duplicate provider name %q: also defined at %s", name, prev.pos))
			continue
		}
		w.provs[name] = pr
	}
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
		msg := strings.TrimRight(strings.ReplaceAll(cueerrors.Details(err, nil), "\n", "; "), "; ")
		d.errf(s, p, "invalid JSON Schema: %s", msg)
		return
	}
	pr.schemaDoc, pr.hasSchema = src, true
}

// workflows decodes a {workflows: [...]} document and returns how many
// workflows it holds.
func (w *wfLoader) workflows(doc *node) int {
	items := w.list(doc, "workflows")
	seen := w.seen
	for i, it := range items {
		p := idx("workflows", i)
		d := &dec{}
		if it.kind != nMap {
			d.errf(it, p, "expected a mapping, got %s", it.describe())
			w.errs = append(w.errs, d.errs...)
			continue
		}
		name := w.required(d, it, p, "name")
		if name != "" {
			if prev, dup := seen[name]; dup {
				d.errf(it.get("name"), join(p, "name"), "duplicate workflow name %q: also defined at %s", name, prev)
			} else {
				seen[name] = it.get("name").pos
			}
		}
		if dep := it.get("depends-on"); dep != nil && dep.kind != nList && dep.kind != nMap {
			d.errf(dep, join(p, "depends-on"), "expected a list or a mapping, got %s", dep.describe())
		}
		pr := w.provider(d, it, p)
		if pr != nil && pr.hasSchema {
			w.params(d, pr, it, p)
		}
		if len(d.errs) == 0 {
			d.errf(it, p, "workflow %s: hoist validates workflows but does not run them yet (custom providers)", name)
		}
		w.errs = append(w.errs, d.errs...)
	}
	return len(items)
}

// provider resolves a workflow's provider: a local one, or nil for one of
// another repository (whose schema hoist does not fetch).
func (w *wfLoader) provider(d *dec, it *node, p string) *provider {
	pn := it.get("provider")
	pp := join(p, "provider")
	switch {
	case pn == nil:
		d.errf(it, p, "field %q is required (hoist knows workflows of custom providers only)", "provider")
	case pn.kind == nMap:
		d.object(pn, pp, "repo", "name", "ref")
		w.required(d, pn, pp, "repo")
		w.required(d, pn, pp, "name")
		if r := pn.get("ref"); r != nil {
			w.required(d, pn, pp, "ref")
		}
	default:
		name, ok := d.str(pn, pp)
		if !ok {
			return nil
		}
		if pr := w.provs[name]; pr != nil {
			return pr
		}
		d.errf(pn, pp, "unknown provider %q: not defined in %s nor in a CUE spec's `providers` (dstack's built-in providers are not available in hoist)", name, ProvidersFile)
	}
	return nil
}

// params unifies a workflow's parameters with its provider's schema.
func (w *wfLoader) params(d *dec, pr *provider, it *node, p string) {
	params := &node{kind: nMap, pos: it.pos}
	for i, k := range it.keys {
		if !contains(workflowKeys, k.str) {
			params.keys = append(params.keys, k)
			params.vals = append(params.vals, it.vals[i])
		}
	}
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
