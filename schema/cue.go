package schema

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

//go:embed schema.cue
var schemaSource []byte

// SchemaSource returns the embedded CUE schema, the reference for every
// field hoist accepts.
func SchemaSource() []byte { return append([]byte(nil), schemaSource...) }

// parseSchema parses the embedded schema. Each CUE context needs its own
// AST: building a file resolves (writes) identifiers in it.
func parseSchema() *ast.File {
	f, err := parser.ParseFile("schema.cue", schemaSource, parser.ParseComments)
	if err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not parse: %v", err))
	}
	return f
}

var defNames = map[Kind]string{
	KindTask:           "#Task",
	KindService:        "#Service",
	KindDevEnvironment: "#DevEnvironment",
	KindFleet:          "#Fleet",
	KindGateway:        "#Gateway",
}

var volumeDefs = map[string]string{
	"aws": "#AWSVolume", "gcp": "#GCPVolume", "azure": "#AzureVolume", "runpod": "#RunpodVolume", "verda": "#VerdaVolume", "kubernetes": "#KubernetesVolume",
}

// cueChecker validates documents against the embedded CUE schema. It is
// owned by one goroutine.
type cueChecker struct {
	ctx    *cue.Context
	schema cue.Value
	defs   map[string]cue.Value
	infos  map[string]*defInfo
	uses   int
}

type cueDoc struct {
	node  *node
	label string
	// wf is "providers" or "workflows" for a top-level list of dstack's
	// custom providers or workflows (see ProvidersFile), not a resource.
	wf string
}

func newCueChecker() *cueChecker {
	c := &cueChecker{}
	c.reset()
	return c
}

// reset builds a fresh context: a CUE context only grows, so a long-lived
// worker renews it now and then.
func (c *cueChecker) reset() {
	c.ctx = cuecontext.New()
	c.schema = c.ctx.BuildFile(parseSchema())
	if err := c.schema.Err(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not compile: %v", err))
	}
	c.defs = map[string]cue.Value{}
	c.infos = map[string]*defInfo{}
	c.uses = 0
}

func (c *cueChecker) def(name string) cue.Value {
	v, ok := c.defs[name]
	if !ok {
		v = c.schema.LookupPath(cue.ParsePath(name))
		c.defs[name] = v
	}
	return v
}

// defInfo describes one definition's top-level fields.
type defInfo struct {
	fields   map[string]cue.Value
	names    []string
	required []string
}

func (c *cueChecker) info(defName string) *defInfo {
	if in, ok := c.infos[defName]; ok {
		return in
	}
	def := c.def(defName)
	in := &defInfo{fields: map[string]cue.Value{}}
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		panic(fmt.Sprintf("schema: %s: %v", defName, err))
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		in.fields[name] = it.Value()
		in.names = append(in.names, name)
		if !it.IsOptional() {
			in.required = append(in.required, name)
		}
	}
	sort.Strings(in.names)
	c.infos[defName] = in
	return in
}

// relErr is a schema error relative to one top-level field's value.
type relErr struct {
	path []string // below the field
	msg  string   // final message, without position or path prefix
	loc  errLoc
}

type errLoc int

const (
	locValue  errLoc = iota // at the value at path
	locKey                  // at the key of the last path element
	locParent               // at the parent of the last path element (missing field)
)

// fieldCache memoizes the schema check of one top-level field value: the
// definitions hold no cross-field constraints (those live in the decoder),
// so a field's verdict depends only on the definition, the field and its
// value. Repositories repeat values (images, resources, profiles) a lot.
var fieldCache struct {
	sync.Mutex
	m map[[32]byte][]relErr
}

const fieldCacheMax = 200_000

func cacheGet(k [32]byte) ([]relErr, bool) {
	fieldCache.Lock()
	defer fieldCache.Unlock()
	v, ok := fieldCache.m[k]
	return v, ok
}

func cachePut(k [32]byte, v []relErr) {
	fieldCache.Lock()
	defer fieldCache.Unlock()
	if fieldCache.m == nil || len(fieldCache.m) >= fieldCacheMax {
		fieldCache.m = make(map[[32]byte][]relErr)
	}
	fieldCache.m[k] = v
}

// check validates doc against the definition of kind, field by field, and
// returns the errors at the positions of the offending values in doc.
func (c *cueChecker) check(ctx context.Context, kind Kind, doc *node) Errors {
	defName := defNames[kind]
	if kind == KindVolume {
		b := doc.get("backend")
		if b == nil || b.kind != nString || volumeDefs[b.str] == "" {
			return nil // the decoder reports a missing or unknown backend
		}
		defName = volumeDefs[b.str]
	}
	if c.uses > 5000 {
		c.reset() // a CUE context only grows
	}
	in := c.info(defName)
	var out Errors
	for _, r := range in.required {
		if !doc.has(r) {
			out = append(out, newError(doc.pos, "", "field %q is required", r))
		}
	}
	var kb []byte
	for i, k := range doc.keys {
		fv, ok := in.fields[k.str]
		if !ok {
			out = append(out, unknownField(k, "", k.str, in.names))
			continue
		}
		kb = append(kb[:0], defName...)
		kb = append(kb, 0)
		kb = append(kb, k.str...)
		kb = append(kb, 0)
		kb = appendNodeKey(kb, doc.vals[i])
		key := sha256.Sum256(kb)
		rel, hit := cacheGet(key)
		if !hit {
			rel = c.checkFieldLinear(ctx, fv, doc.vals[i], k.str)
			if ctx.Err() != nil {
				out = append(out, newError(doc.vals[i].pos, k.str, "validation stopped at the revision's deadline"))
				break
			}
			cachePut(key, rel)
		}
		for _, re := range rel {
			out = append(out, placeError(doc, k.str, re))
		}
	}
	return dropAncestors(dedupeByPos(out))
}

// dropAncestors drops an error when another one lies strictly below its
// path: a failed disjunction reports every enclosing value too.
func dropAncestors(es Errors) Errors {
	below := map[string]bool{} // every proper prefix of an error's path
	for _, e := range es {
		for i := 1; i < len(e.Path); i++ {
			if c := e.Path[i]; c == '.' || c == '[' {
				below[e.Path[:i]] = true
			}
		}
	}
	out := es[:0:0]
	for _, e := range es {
		if e.Path == "" || !below[e.Path] {
			out = append(out, e)
		}
	}
	return out
}

// checkField unifies one field value with its constraint.
func (c *cueChecker) checkField(fv cue.Value, val *node, field string) (out []relErr) {
	c.uses++
	defer func() {
		if r := recover(); r != nil {
			// The evaluator must never take the daemon down on user input.
			c.reset()
			out = []relErr{{msg: fmt.Sprintf("internal error validating this field: %v", r), loc: locValue}}
		}
	}()
	v := fv.Unify(c.ctx.BuildExpr(toAST(val)))
	err := v.Validate(cue.Concrete(true))
	if err == nil {
		return nil
	}
	for _, e := range cueerrors.Errors(err) {
		path := e.Path()
		// Paths start with the definition and the field: drop both.
		for len(path) > 0 && path[0] != field {
			path = path[1:]
		}
		if len(path) > 0 {
			path = path[1:]
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		full := append([]string{field}, path...)
		wrap := &node{kind: nMap, keys: []*node{{kind: nString, str: field}}, vals: []*node{val}}
		target, parent, key := locate(wrap, full)
		switch {
		case strings.Contains(msg, "field not allowed") && parent != nil && len(path) > 0:
			allowed := c.allowedFields(v, path[:len(path)-1], key)
			m := fmt.Sprintf("field %q not allowed", key)
			if s := suggest(key, allowed); s != "" {
				m += fmt.Sprintf(" (did you mean %q?)", s)
			}
			out = append(out, relErr{path: path, msg: m, loc: locKey})
		case target == nil && parent != nil:
			if strings.Contains(msg, "incomplete") || strings.Contains(msg, "required") || strings.Contains(msg, "non-concrete") {
				out = append(out, relErr{path: path, msg: fmt.Sprintf("field %q is required", key), loc: locParent})
			} else {
				out = append(out, relErr{path: path, msg: cleanMsg(msg), loc: locParent})
			}
		case target != nil:
			out = append(out, relErr{path: path, msg: c.describeConflict(msg, target), loc: locValue})
		default:
			out = append(out, relErr{path: path, msg: cleanMsg(msg), loc: locValue})
		}
	}
	return out
}

// placeError turns a field-relative error into a positioned one.
func placeError(doc *node, field string, re relErr) *Error {
	full := append([]string{field}, re.path...)
	target, parent, key := locate(doc, full)
	switch re.loc {
	case locKey:
		at := parent
		if parent != nil {
			if k := parent.keyNode(key); k != nil {
				at = k
			}
		}
		if at == nil {
			at = doc
		}
		return newError(at.pos, dottedPath(full), "%s", re.msg)
	case locParent:
		at := parent
		if at == nil {
			at = doc
		}
		return newError(at.pos, dottedPath(full[:len(full)-1]), "%s", re.msg)
	}
	if target == nil {
		target = doc
	}
	return newError(target.pos, dottedPath(full), "%s", re.msg)
}

// appendNodeKey serializes n unambiguously for cache keys.
func appendNodeKey(b []byte, n *node) []byte {
	b = append(b, byte('0'+n.kind))
	switch n.kind {
	case nBool:
		if n.b {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	case nInt:
		b = strconv.AppendInt(b, n.i, 10)
	case nFloat:
		b = strconv.AppendFloat(b, n.f, 'g', -1, 64)
	case nString:
		b = strconv.AppendInt(b, int64(len(n.str)), 10)
		b = append(b, ':')
		b = append(b, n.str...)
	case nList:
		b = strconv.AppendInt(b, int64(len(n.items)), 10)
		b = append(b, '[')
		for _, it := range n.items {
			b = appendNodeKey(b, it)
		}
	case nMap:
		b = strconv.AppendInt(b, int64(len(n.keys)), 10)
		b = append(b, '{')
		for i, k := range n.keys {
			b = strconv.AppendInt(b, int64(len(k.str)), 10)
			b = append(b, ':')
			b = append(b, k.str...)
			b = appendNodeKey(b, n.vals[i])
		}
	}
	return b
}

// dedupeByPos keeps one error per position and path, preferring messages
// that are not generic disjunction failures.
func dedupeByPos(es Errors) Errors {
	type key struct {
		pos  Position
		path string
	}
	best := map[key]*Error{}
	var order []key
	for _, e := range es {
		k := key{e.Pos, e.Path}
		if b, ok := best[k]; ok {
			if score(e) > score(b) {
				best[k] = e
			}
			continue
		}
		best[k] = e
		order = append(order, k)
	}
	out := make(Errors, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	return out
}

func score(e *Error) int {
	switch {
	case strings.Contains(e.Msg, "not allowed"):
		return 3
	case strings.Contains(e.Msg, "required"):
		return 2
	case strings.Contains(e.Msg, "disjunction"):
		return 0
	}
	return 1
}

var kindNames = map[cue.Kind]string{}

// describeConflict rewrites CUE's conflict messages in terms of the user's
// value.
func (c *cueChecker) describeConflict(msg string, target *node) string {
	msg = cleanMsg(msg)
	switch {
	case strings.Contains(msg, "empty disjunction") || strings.Contains(msg, "conflicting values") || strings.Contains(msg, "mismatched types"):
		if target.kind == nMap || target.kind == nList || target.kind == nNull {
			return fmt.Sprintf("invalid value: unexpected %s", target.describe())
		}
		return fmt.Sprintf("invalid value %s (%s)", target.String(), target.describe())
	}
	return msg
}

func cleanMsg(msg string) string {
	msg = strings.ReplaceAll(msg, "#", "")
	return msg
}

// allowedFields lists the fields the schema allows at path, for
// did-you-mean suggestions.
func (c *cueChecker) allowedFields(v cue.Value, path []string, exclude string) []string {
	sel := make([]cue.Selector, 0, len(path))
	for _, p := range path {
		if i, err := strconv.Atoi(p); err == nil {
			sel = append(sel, cue.Index(i))
		} else {
			sel = append(sel, cue.Str(p))
		}
	}
	at := v.LookupPath(cue.MakePath(sel...))
	var out []string
	collect := func(x cue.Value) {
		it, err := x.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			if s := it.Selector(); s.IsString() && s.Unquoted() != exclude {
				out = append(out, s.Unquoted())
			}
		}
	}
	if op, args := at.Expr(); op == cue.OrOp {
		for _, a := range args {
			collect(a)
		}
	} else {
		collect(at)
	}
	sort.Strings(out)
	return out
}

// locate finds the node at path, or else its parent and the missing key.
func locate(doc *node, path []string) (target, parent *node, key string) {
	cur := doc
	for i, p := range path {
		var next *node
		switch cur.kind {
		case nMap:
			next = cur.get(p)
		case nList:
			if j, err := strconv.Atoi(p); err == nil && j >= 0 && j < len(cur.items) {
				next = cur.items[j]
			}
		}
		if next == nil {
			return nil, cur, p
		}
		if i == len(path)-1 {
			return next, cur, p
		}
		cur = next
	}
	return doc, nil, ""
}

func dottedPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// toAST renders a node as a CUE expression.
func toAST(n *node) ast.Expr {
	switch n.kind {
	case nNull:
		return ast.NewNull()
	case nBool:
		return ast.NewBool(n.b)
	case nInt:
		return &ast.BasicLit{Kind: token.INT, Value: strconv.FormatInt(n.i, 10)}
	case nFloat:
		if n.f == math.Trunc(n.f) && math.Abs(n.f) < 1<<53 {
			// pydantic's lax mode takes an integral float wherever an int is
			// expected; every float constraint in the schema accepts ints.
			return &ast.BasicLit{Kind: token.INT, Value: strconv.FormatInt(int64(n.f), 10)}
		}
		s := strconv.FormatFloat(n.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		if strings.ContainsAny(s, "IN") { // Inf, NaN: not CUE numbers
			return ast.NewString(s)
		}
		return &ast.BasicLit{Kind: token.FLOAT, Value: s}
	case nString:
		return ast.NewString(n.str)
	case nList:
		l := &ast.ListLit{Elts: make([]ast.Expr, len(n.items))}
		for i, it := range n.items {
			l.Elts[i] = toAST(it)
		}
		return l
	case nMap:
		s := &ast.StructLit{Elts: make([]ast.Decl, len(n.keys))}
		for i, k := range n.keys {
			s.Elts[i] = &ast.Field{Label: ast.NewString(k.str), Value: toAST(n.vals[i])}
		}
		return s
	}
	return ast.NewNull()
}

// extract evaluates the CUE files of one directory (grouped by package)
// and returns every resource they define: any struct with a `type` field
// naming a kind, found by walking regular fields (the field label is the
// fallback name). The schema's definitions (#Task, #Service, ...) are in
// scope.
func (c *cueChecker) extract(files []string, parsed []*ast.File) (docs []cueDoc, errs Errors) {
	defer func() {
		if r := recover(); r != nil {
			c.reset()
			docs, errs = nil, Errors{{Pos: Position{File: files[0], Line: 1, Column: 1},
				Msg: fmt.Sprintf("internal error evaluating CUE: %v", r)}}
		}
	}()
	byPkg := map[string][]*ast.File{}
	var pkgs []string
	for _, f := range parsed {
		pkg := f.PackageName()
		if _, ok := byPkg[pkg]; !ok {
			pkgs = append(pkgs, pkg)
		}
		byPkg[pkg] = append(byPkg[pkg], f)
	}
	for _, pkg := range pkgs {
		fs := byPkg[pkg]
		first := fs[0].Filename
		inst := build.NewContext().NewInstance(path.Dir(first), nil)
		for _, f := range fs {
			if err := inst.AddSyntax(f); err != nil {
				errs = append(errs, cueErrors(f.Filename, err)...)
			}
		}
		v := c.ctx.BuildInstance(inst, cue.Scope(c.schema))
		if err := v.Err(); err != nil {
			errs = append(errs, cueErrors(first, err)...)
			continue
		}
		if err := v.Validate(cue.Concrete(true)); err != nil {
			errs = append(errs, cueErrors(first, err)...)
			continue
		}
		found := 0
		var walk func(v cue.Value, label string, depth int)
		walk = func(v cue.Value, label string, depth int) {
			if depth > 20 {
				return
			}
			if depth == 1 && (label == "providers" || label == "workflows") && v.Kind() == cue.ListKind {
				n, e := fromCue(first, v, []string{label}, 1)
				if e != nil {
					errs = append(errs, e)
					return
				}
				found++
				docs = append(docs, cueDoc{node: n, label: label, wf: label})
				return
			}
			switch v.Kind() {
			case cue.StructKind:
				if t := v.LookupPath(cue.MakePath(cue.Str("type"))); t.Exists() {
					if s, err := t.String(); err == nil && validKind(s) {
						n, e := fromCue(first, v, []string{label}, 1)
						if e != nil {
							errs = append(errs, e)
							return
						}
						found++
						docs = append(docs, cueDoc{node: n, label: sanitizeName(label)})
						return
					}
				}
				it, err := v.Fields()
				if err != nil {
					return
				}
				for it.Next() {
					walk(it.Value(), it.Selector().Unquoted(), depth+1)
				}
			case cue.ListKind:
				it, err := v.List()
				if err != nil {
					return
				}
				for it.Next() {
					walk(it.Value(), label, depth+1)
				}
			}
		}
		walk(v, "", 0)
		if found == 0 && len(errs) == 0 {
			errs = append(errs, &Error{Pos: Position{File: first, Line: 1, Column: 1},
				Msg: "no resources defined: expected structs with a `type` field naming a kind"})
		}
	}
	return docs, errs
}

func cuePos(file string, p token.Pos) Position {
	if !p.IsValid() {
		return Position{File: file, Line: 1, Column: 1}
	}
	if f := p.Filename(); f != "" {
		file = f
	}
	return Position{File: file, Line: p.Line(), Column: p.Column()}
}

// cueErrors converts CUE evaluation errors of user CUE files, collapsing
// the per-branch noise of a failed disjunction into one message per path.
func cueErrors(file string, err error) Errors {
	type group struct {
		pos       token.Pos
		path      []string
		msgs      []string
		conflicts [][2]string
	}
	var order []string
	groups := map[string]*group{}
	for _, e := range cueerrors.Errors(err) {
		pos := e.Position()
		for _, ip := range e.InputPositions() {
			if ip.Filename() != "" && ip.Filename() != "schema.cue" {
				pos = ip
				break
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		key := strings.Join(e.Path(), ".")
		g, ok := groups[key]
		if !ok {
			g = &group{path: e.Path()}
			groups[key] = g
			order = append(order, key)
		}
		if m := conflictRE.FindStringSubmatch(msg); m != nil {
			g.conflicts = append(g.conflicts, [2]string{m[1], m[2]})
		} else if !strings.Contains(msg, "empty disjunction") {
			g.msgs = append(g.msgs, msg)
		}
		if !g.pos.IsValid() || (pos.IsValid() && pos.Filename() != "schema.cue" && (g.pos.Filename() == "schema.cue" || pos.Line() > 1 && g.pos.Line() <= 1)) {
			g.pos = pos
		}
	}
	var out Errors
	for _, key := range order {
		g := groups[key]
		msg := strings.Join(g.msgs, "; ")
		if len(g.conflicts) > 0 {
			msg = summarizeConflicts(g.conflicts)
		}
		if msg == "field not allowed" && len(g.path) > 0 {
			key := g.path[len(g.path)-1]
			msg = fmt.Sprintf("field %q not allowed", key)
			if s := suggest(key, allFieldNames()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		if msg == "" {
			msg = "invalid value"
		}
		dotted := dottedPath(g.path)
		if dotted != "" {
			msg = dotted + ": " + msg
		}
		out = append(out, &Error{Pos: cuePos(file, g.pos), Path: dotted, Msg: cleanMsg(msg)})
	}
	if len(out) == 0 {
		out = append(out, &Error{Pos: Position{File: file, Line: 1, Column: 1}, Msg: err.Error()})
	}
	return out
}

// allFieldNames feeds did-you-mean suggestions for CUE evaluation errors,
// where the enclosing definition is not known: every field the embedded
// schema names.
var allFieldNames = sync.OnceValue(func() []string {
	var all []string
	for _, names := range schemaTable().fields {
		all = append(all, names...)
	}
	return sortedSet(all)
})

var conflictRE = regexp.MustCompile(`^conflicting values (.+?) and (.+?)(?: \(mismatched types [^)]*\))?$`)

// summarizeConflicts finds the user's value (the operand common to every
// conflict) and lists the allowed literals.
func summarizeConflicts(cs [][2]string) string {
	count := map[string]int{}
	for _, c := range cs {
		count[c[0]]++
		if c[1] != c[0] {
			count[c[1]]++
		}
	}
	value := ""
	for v, n := range count {
		if n == len(cs) && (value == "" || v < value) {
			value = v
		}
	}
	if value == "" {
		return fmt.Sprintf("conflicting values %s and %s", cs[0][0], cs[0][1])
	}
	var allowed []string
	seen := map[string]bool{}
	for _, c := range cs {
		for _, o := range c {
			if o == value || seen[o] {
				continue
			}
			seen[o] = true
			if strings.HasPrefix(o, "\"") || strings.HasPrefix(o, ">") || strings.HasPrefix(o, "<") || (o != "" && o[0] >= '0' && o[0] <= '9') {
				allowed = append(allowed, o)
			}
		}
	}
	sort.Strings(allowed)
	if len(allowed) == 0 {
		return fmt.Sprintf("invalid value %s", value)
	}
	return fmt.Sprintf("invalid value %s (allowed: %s)", value, strings.Join(allowed, ", "))
}

// fromCue converts a concrete CUE value into a node, refusing lists,
// structs and nesting over MaxListItems, MaxMapKeys and MaxDepth before
// converting them.
func fromCue(file string, v cue.Value, path []string, depth int) (*node, *Error) {
	n := &node{pos: cuePos(file, v.Pos())}
	if depth > MaxDepth {
		return nil, depthLimitError(n.pos, path[1:])
	}
	switch v.Kind() {
	case cue.NullKind:
		n.kind = nNull
	case cue.BoolKind:
		b, _ := v.Bool()
		n.kind, n.b = nBool, b
	case cue.IntKind:
		i, err := v.Int64()
		if err != nil {
			f, _ := v.Float64()
			n.kind, n.f = nFloat, f
			break
		}
		n.kind, n.i = nInt, i
	case cue.FloatKind:
		f, _ := v.Float64()
		n.kind, n.f = nFloat, f
	case cue.StringKind:
		s, _ := v.String()
		n.kind, n.str = nString, s
	case cue.BytesKind:
		b, _ := v.Bytes()
		n.kind, n.str = nString, string(b)
	case cue.ListKind:
		n.kind = nList
		if l, err := v.Len().Int64(); err == nil && l > MaxListItems {
			return nil, listLimitError(n.pos, path[1:], int(l))
		}
		it, err := v.List()
		if err != nil {
			return nil, &Error{Pos: n.pos, Msg: err.Error()}
		}
		for i := 0; it.Next(); i++ {
			if i >= MaxListItems {
				return nil, listLimitError(n.pos, path[1:], i+1)
			}
			c, e := fromCue(file, it.Value(), append(path, strconv.Itoa(i)), depth+1)
			if e != nil {
				return nil, e
			}
			n.items = append(n.items, c)
		}
	case cue.StructKind:
		n.kind = nMap
		it, err := v.Fields()
		if err != nil {
			return nil, &Error{Pos: n.pos, Msg: err.Error()}
		}
		for it.Next() {
			if len(n.keys) >= MaxMapKeys {
				count := len(n.keys) + 1
				for it.Next() {
					count++
				}
				return nil, mapLimitError(n.pos, path[1:], count)
			}
			key := it.Selector().Unquoted()
			c, e := fromCue(file, it.Value(), append(path, key), depth+1)
			if e != nil {
				return nil, e
			}
			kp := c.pos
			n.keys = append(n.keys, &node{kind: nString, str: key, pos: kp})
			n.vals = append(n.vals, c)
		}
	default:
		return nil, &Error{Pos: n.pos, Msg: fmt.Sprintf("value is not concrete: %v", v)}
	}
	return n, nil
}
