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
	f, ok := fieldTable()[key]
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

// fieldTable compiles the embedded schema once, on first use, and lists
// the fields of every mapping it defines (see fieldsAt for the keys).
// Compiling takes milliseconds, so it is not done at package init.
var fieldTable = sync.OnceValue(func() map[string][]string {
	v := cuecontext.New().BuildFile(parseSchema())
	if err := v.Err(); err != nil {
		panic(fmt.Sprintf("schema: embedded schema does not compile: %v", err))
	}
	w := fieldWalker{table: map[string][]string{}, empty: v.Context().CompileString("{}")}
	it, err := v.Fields(cue.Definitions(true))
	if err != nil {
		panic(fmt.Sprintf("schema: embedded schema: %v", err))
	}
	for it.Next() {
		if it.Selector().IsDefinition() {
			w.walk(it.Selector().String(), it.Value(), 0)
		}
	}
	return w.table
})

type fieldWalker struct {
	table map[string][]string
	empty cue.Value
	// ambiguous marks selector keys that match several mappings.
	ambiguous map[string]bool
}

// walk records the fields of the mappings v may hold at key and walks
// their fields and list items.
func (w *fieldWalker) walk(key string, v cue.Value, depth int) {
	if depth > MaxDepth {
		return
	}
	var structs [][]cue.Value // per mapping: its field values, in order
	var names [][]string
	seen := map[string]bool{}
	for _, b := range append(cueBranches(v), cueBranches(v.Unify(w.empty))...) {
		if b.IncompleteKind()&cue.StructKind == 0 {
			continue
		}
		it, err := b.Fields(cue.Optional(true))
		if err != nil {
			continue
		}
		var ns []string
		var vs []cue.Value
		for it.Next() {
			ns = append(ns, it.Selector().Unquoted())
			vs = append(vs, it.Value())
		}
		sig := fmt.Sprint(ns)
		if seen[sig] {
			continue
		}
		seen[sig] = true
		names, structs = append(names, ns), append(structs, vs)
	}
	if len(structs) > 0 {
		for i, ns := range names {
			for j, n := range ns {
				if !contains(w.table[key], n) {
					w.table[key] = append(w.table[key], n)
				}
				w.walk(key+"."+n, structs[i][j], depth+1)
			}
		}
		if w.table[key] == nil {
			w.table[key] = []string{} // a mapping with no fixed fields
		}
	}
	if len(structs) > 1 {
		for i, ns := range names {
			for j, n := range ns {
				w.branch(key+"{"+n+"}", ns)
				if s, err := structs[i][j].String(); err == nil {
					w.branch(key+"{"+n+"="+s+"}", ns)
				}
			}
		}
	}
	if v.IncompleteKind()&cue.ListKind != 0 {
		for _, b := range cueBranches(v) {
			if b.IncompleteKind()&cue.ListKind == 0 {
				continue
			}
			if e := b.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
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
	if _, dup := w.table[key]; dup && fmt.Sprint(w.table[key]) != fmt.Sprint(names) {
		w.ambiguous[key] = true
		w.table[key] = nil
		return
	}
	if !w.ambiguous[key] {
		w.table[key] = names
	}
}

// cueBranches flattens a disjunction, through references to definitions,
// into its values.
func cueBranches(v cue.Value) []cue.Value {
	op, args := v.Expr()
	if op == cue.SelectorOp {
		op, args = cue.Dereference(v).Expr()
	}
	if op == cue.OrOp {
		var out []cue.Value
		for _, a := range args {
			out = append(out, cueBranches(a)...)
		}
		return out
	}
	return []cue.Value{v}
}
