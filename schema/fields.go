package schema

import (
	"fmt"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// fieldsAt returns the fields the embedded CUE schema allows in the
// mapping at key, so that the decoder's strict checks and the schema have
// one source of truth. A key names a definition ("#Resources"), a field
// below it ("#Run.registry_auth"), the items of a list ("#Probe.headers[]")
// and, where a value may be one of several mappings, the one that has a
// field ("#MountPoint{instance_path}") or a field with a given value
// ("#Service.model{format=tgi}"); without a selector the key lists the
// fields of all those mappings. An unknown or ambiguous key is a
// programming error and panics.
func fieldsAt(key string) []string {
	f, ok := schemaTable().fields[key]
	if !ok || f == nil {
		panic(fmt.Sprintf("schema: no single mapping at %q in the embedded schema", key))
	}
	return f
}

// fieldsExcept returns fieldsAt(key) without the names in drop.
func fieldsExcept(key string, drop ...string) []string {
	var out []string
	for _, f := range fieldsAt(key) {
		if !contains(drop, f) {
			out = append(out, f)
		}
	}
	return out
}

// valuesAt returns the strings the embedded CUE schema allows at key (see
// fieldsAt), in the schema's order: the literal branches of a disjunction
// such as #SpotPolicy or #Profile.creation_policy. A key without string
// literals is a programming error and panics.
func valuesAt(key string) []string {
	v := schemaTable().values[key]
	if len(v) == 0 {
		panic(fmt.Sprintf("schema: no string values at %q in the embedded schema", key))
	}
	return v
}

// requiredAt returns the fields the embedded CUE schema requires in the
// mapping at key (see fieldsAt), in the schema's order. A key that names
// no single mapping is a programming error and panics.
func requiredAt(key string) []string {
	r, ok := schemaTable().required[key]
	if !ok {
		panic(fmt.Sprintf("schema: no single mapping at %q in the embedded schema", key))
	}
	return r
}

// fieldTable holds, per key, the fields of the mappings, the fields
// required when there is one mapping, and the string literals the
// embedded schema allows there.
type fieldTable struct {
	fields   map[string][]string
	required map[string][]string
	values   map[string][]string
}

// schemaTable builds the table once, on first use: compiling the schema
// takes milliseconds, too long for package init.
var schemaTable = sync.OnceValue(buildFieldTable)

// buildFieldTable compiles the embedded schema and walks every definition.
func buildFieldTable() *fieldTable {
	v := cuecontext.New().BuildFile(parseSchema())
	if err := v.Err(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not compile: %v", err))
	}
	w := fieldWalker{fieldTable: fieldTable{fields: map[string][]string{}, required: map[string][]string{}, values: map[string][]string{}}}
	it, err := v.Fields(cue.Definitions(true))
	if err != nil {
		panic(fmt.Sprintf("schema: embedded schema: %v", err))
	}
	for it.Next() {
		if it.Selector().IsDefinition() {
			w.walk(it.Selector().String(), it.Value(), 0)
		}
	}
	return &w.fieldTable
}

type fieldWalker struct {
	fieldTable
	// ambiguous marks selector keys that match several mappings.
	ambiguous map[string]bool
}

// walk records the fields of the mappings v may hold at key and the string
// literals it may be, and walks the fields and list items of the mappings
// written in place; below a definition's own branches, a mapping that is a
// reference to a definition contributes its field names only, since that
// definition is walked under its own name.
func (w *fieldWalker) walk(key string, v cue.Value, depth int) {
	if depth > MaxDepth {
		return
	}
	var names [][]string
	var values [][]cue.Value // per mapping: its field values, in order
	var inPlace []bool
	var req []string // the required fields, meaningful when there is one mapping
	for _, b := range cueBranches(v, false, nil) {
		if s, err := b.v.String(); err == nil && b.v.IsConcrete() && !contains(w.values[key], s) {
			w.values[key] = append(w.values[key], s)
		}
		if b.v.IncompleteKind()&cue.StructKind == 0 {
			continue
		}
		it, err := b.v.Fields(cue.Optional(true))
		if err != nil {
			continue
		}
		var ns []string
		var vs []cue.Value
		for it.Next() {
			ns = append(ns, it.Selector().Unquoted())
			vs = append(vs, it.Value())
			if !it.IsOptional() {
				req = append(req, it.Selector().Unquoted())
			}
		}
		names, values, inPlace = append(names, ns), append(values, vs), append(inPlace, !b.ref || depth == 0)
	}
	if len(names) == 1 {
		w.required[key] = req
	}
	if len(names) > 0 && w.fields[key] == nil {
		w.fields[key] = []string{} // a mapping with no fixed fields
	}
	for i, ns := range names {
		for j, n := range ns {
			if !contains(w.fields[key], n) {
				w.fields[key] = append(w.fields[key], n)
			}
			if inPlace[i] {
				w.walk(key+"."+n, values[i][j], depth+1)
			}
		}
	}
	if len(names) > 1 {
		for i, ns := range names {
			for j, n := range ns {
				w.branch(key+"{"+n+"}", ns)
				if s, err := values[i][j].String(); err == nil {
					w.branch(key+"{"+n+"="+s+"}", ns)
				}
			}
		}
	}
	if v.IncompleteKind()&cue.ListKind != 0 {
		for _, b := range cueBranches(v, false, nil) {
			if b.ref || b.v.IncompleteKind()&cue.ListKind == 0 {
				continue
			}
			if e := b.v.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
				w.walk(key+"[]", e, depth+1)
			}
		}
	}
}

// branch records the fields of one of several mappings at a selector key,
// or marks the key ambiguous when another mapping claims it too.
func (w *fieldWalker) branch(key string, names []string) {
	if w.ambiguous == nil {
		w.ambiguous = map[string]bool{}
	}
	if _, dup := w.fields[key]; dup && fmt.Sprint(w.fields[key]) != fmt.Sprint(names) {
		w.ambiguous[key] = true
		w.fields[key] = nil
		return
	}
	if !w.ambiguous[key] {
		w.fields[key] = names
	}
}

// cueBranch is one value of a disjunction; ref says it was reached
// through a reference to a definition.
type cueBranch struct {
	v   cue.Value
	ref bool
}

// cueBranches flattens a disjunction, through references to definitions,
// into its values.
func cueBranches(v cue.Value, ref bool, out []cueBranch) []cueBranch {
	op, args := v.Expr()
	if op == cue.SelectorOp {
		ref = true
		op, args = cue.Dereference(v).Expr()
	}
	if op == cue.OrOp {
		for _, a := range args {
			out = cueBranches(a, ref, out)
		}
		return out
	}
	return append(out, cueBranch{v, ref})
}
