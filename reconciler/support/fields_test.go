package support

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"hoist/schema"
)

// kindDefs maps each kind to its definition in the embedded schema.
var kindDefs = map[schema.Kind]string{
	schema.KindTask: "#Task", schema.KindService: "#Service", schema.KindDevEnvironment: "#DevEnvironment",
	schema.KindFleet: "#Fleet", schema.KindVolume: "#Volume", schema.KindGateway: "#Gateway",
	schema.KindWorkflow: "#Workflow", schema.KindProvider: "#Provider",
}

// schemaFields walks the embedded CUE schema and returns, per kind, every
// field path in the table's form ("volumes[].name"): the fields of each
// definition, of every struct a field may hold (each branch of a
// disjunction) and of list items.
func schemaFields(t *testing.T) map[schema.Kind][]string {
	t.Helper()
	v := cuecontext.New().CompileBytes(schema.SchemaSource())
	if err := v.Err(); err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	out := map[schema.Kind][]string{}
	for k := range kindDefs {
		def := v.LookupPath(cue.ParsePath(kindDefs[k]))
		if !def.Exists() {
			t.Fatalf("schema has no %s for kind %s", kindDefs[k], k)
		}
		set := map[string]bool{}
		walkFields(def, "", set, 0)
		for f := range set {
			out[k] = append(out[k], f)
		}
		sort.Strings(out[k])
	}
	return out
}

func walkFields(v cue.Value, prefix string, set map[string]bool, depth int) {
	if depth > 16 {
		return
	}
	k := v.IncompleteKind()
	if k&cue.StructKind != 0 {
		// A disjunction shows its branches through Expr, or, when it is
		// reached through a reference, once unified with {}.
		for _, b := range append(branches(v), branches(v.Unify(v.Context().CompileString("{}")))...) {
			if b.IncompleteKind()&cue.StructKind == 0 {
				continue
			}
			it, err := b.Fields(cue.Optional(true))
			if err != nil {
				continue
			}
			for it.Next() {
				name := strings.TrimSuffix(it.Selector().Unquoted(), "?")
				p := name
				if prefix != "" {
					p = prefix + "." + name
				}
				set[p] = true
				walkFields(it.Value(), p, set, depth+1)
			}
		}
	}
	if k&cue.ListKind != 0 {
		for _, b := range append(branches(v), v.Unify(v.Context().CompileString("[...]"))) {
			if e := b.LookupPath(cue.MakePath(cue.AnyIndex)); b.IncompleteKind()&cue.ListKind != 0 && e.Exists() {
				walkFields(e, prefix+"[]", set, depth+1)
			}
		}
	}
}

// branches flattens a disjunction into its values.
func branches(v cue.Value) []cue.Value {
	op, args := v.Expr()
	if op == cue.SelectorOp {
		// A reference to a definition: its disjunction is the definition's.
		op, args = cue.Dereference(v).Expr()
	}
	if op == cue.OrOp {
		var out []cue.Value
		for _, a := range args {
			out = append(out, branches(a)...)
		}
		return out
	}
	return []cue.Value{v}
}

// TestTable_decidesEveryFieldOfTheSchema fails when a field of the
// embedded schema has no row (its own or an ancestor's) for some kind: a
// field added to the schema must be decided here.
func TestTable_decidesEveryFieldOfTheSchema(t *testing.T) {
	fields := schemaFields(t)
	n := 0
	for _, k := range schema.Kinds {
		if len(fields[k]) < 5 {
			t.Fatalf("the schema walk found only %d fields of %s", len(fields[k]), k)
		}
		for _, f := range fields[k] {
			n++
			if _, ok := Lookup(k, f); !ok {
				t.Errorf("%s field %q has no row in support.Table: decide it (honoured with a test, partial, refused or advisory)", k, f)
			}
		}
	}
	t.Logf("%d fields of %d kinds decided by %d rows", n, len(schema.Kinds), len(Table))
}

// TestTable_rowsNameFieldsOfTheSchema fails on a row whose field is not in
// the schema for one of its kinds (a stale or misspelt row).
func TestTable_rowsNameFieldsOfTheSchema(t *testing.T) {
	fields := schemaFields(t)
	seen := map[string]bool{}
	for _, r := range Table {
		for _, k := range r.Kinds {
			key := string(k) + " " + r.Field
			if seen[key] {
				t.Errorf("two rows decide %s %q", k, r.Field)
			}
			seen[key] = true
			if r.Field != "" && !slices.Contains(fields[k], r.Field) {
				t.Errorf("row %q: %s has no such field in the schema", r.Field, k)
			}
		}
	}
}

// TestTable_rowsAreComplete checks each row has what its decision needs:
// a test that exists for honoured and partial rows, a note and a detector
// for the others.
func TestTable_rowsAreComplete(t *testing.T) {
	tests := testNames(t)
	for _, r := range Table {
		name := r.Field
		if len(r.Kinds) == 0 {
			t.Errorf("row %q has no kinds", name)
		}
		switch r.Decision {
		case Honoured, Partial:
			if !tests[r.Test] {
				t.Errorf("row %q names test %q, which does not exist (want <dir>.<TestName>)", name, r.Test)
			}
		case Refused, Advisory:
			if r.Test != "" {
				t.Errorf("row %q is %s but names a test", name, r.Decision)
			}
		default:
			t.Errorf("row %q has decision %q", name, r.Decision)
		}
		needsUse := r.Decision != Honoured
		if needsUse != (r.uses != nil) || (needsUse && r.Note == "") {
			t.Errorf("row %q (%s): a detector and a note are needed exactly when something is refused or warned about", name, r.Decision)
		}
	}
}

// testNames lists "<dir>.<TestName>" for every test function of the
// directories the table names, read with go/parser from the module.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, r := range Table {
		if d, _, ok := strings.Cut(r.Test, ".Test"); ok {
			dirs[d] = true
		}
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for d := range dirs {
		files, err := filepath.Glob(filepath.Join("..", "..", filepath.FromSlash(d), "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("no test files in %s", d)
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			for _, decl := range af.Decls {
				if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
					out[d+"."+fd.Name.Name] = true
				}
			}
		}
	}
	return out
}

// TestImports_onlySchemaOfHoist keeps the package pure: of hoist's
// packages it imports hoist/schema only, so that validate and plan apply
// exactly what serve applies without pulling in the runtime.
func TestImports_onlySchemaOfHoist(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, "hoist/") && p != "hoist/schema" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
