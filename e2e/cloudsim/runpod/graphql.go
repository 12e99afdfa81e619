package runpod

import (
	_ "embed"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator"
)

//go:embed schema.graphql
var schemaSDL string

// schema is the parsed SDL; it is fixed, so a failure is a bug.
var schema = gqlparser.MustLoadSchema(&ast.Source{Name: "schema.graphql", Input: schemaSDL})

// A resolver computes a field from its arguments (with the request's
// variables substituted). It returns a value made of scalars, maps
// (objects, whose values may again be resolvers) and slices.
type resolver func(args map[string]any) (any, *gqlerror.Error)

// request is one GraphQL request: the query, the operation to run, the
// variables.
type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// execute parses and validates req against the schema, then runs its
// operation over root (top-level field name → resolver), projecting each
// result onto the selection set. Errors follow the GraphQL spec: validation
// errors leave no data; a resolver's error sets its field to null and is
// listed with its path.
func execute(req request, root map[string]resolver) (data map[string]any, errs gqlerror.List) {
	doc, errs := gqlparser.LoadQueryWithRules(schema, req.Query, nil)
	if len(errs) > 0 {
		return nil, errs
	}
	var op *ast.OperationDefinition
	switch {
	case req.OperationName != "":
		op = doc.Operations.ForName(req.OperationName)
	case len(doc.Operations) == 1:
		op = doc.Operations[0]
	}
	if op == nil {
		return nil, gqlerror.List{gqlerror.Errorf("Must provide a valid operation name")}
	}
	vars, err := validator.VariableValues(schema, op, req.Variables)
	if err != nil {
		if ge, ok := err.(*gqlerror.Error); ok {
			return nil, gqlerror.List{ge}
		}
		return nil, gqlerror.List{gqlerror.Wrap(err)}
	}
	data = map[string]any{}
	for _, f := range fields(op.SelectionSet) {
		if f.Name == "__typename" {
			data[f.Alias] = string(op.Operation)
			continue
		}
		fn := root[f.Name]
		if fn == nil {
			errs = append(errs, fieldError(f, gqlerror.Errorf("Cannot query field %q: not simulated", f.Name)))
			data[f.Alias] = nil
			continue
		}
		v, e := fn(f.ArgumentMap(vars))
		if e != nil {
			errs = append(errs, fieldError(f, e))
			data[f.Alias] = nil
			continue
		}
		pv, perrs := project(v, f.SelectionSet, vars, ast.Path{ast.PathName(f.Alias)})
		data[f.Alias] = pv
		errs = append(errs, perrs...)
	}
	return data, errs
}

func fieldError(f *ast.Field, e *gqlerror.Error) *gqlerror.Error {
	if e.Path == nil {
		e.Path = ast.Path{ast.PathName(f.Alias)}
	}
	if len(e.Locations) == 0 && f.Position != nil {
		e.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
	}
	return e
}

// fields flattens a selection set: fields, and those of fragments (the
// simulator's types have no interfaces, so every fragment applies).
func fields(set ast.SelectionSet) []*ast.Field {
	var out []*ast.Field
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			out = append(out, s)
		case *ast.InlineFragment:
			out = append(out, fields(s.SelectionSet)...)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				out = append(out, fields(s.Definition.SelectionSet)...)
			}
		}
	}
	return out
}

// project keeps of v what set selects, calling the resolvers it meets.
func project(v any, set ast.SelectionSet, vars map[string]any, path ast.Path) (any, gqlerror.List) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []map[string]any:
		out := make([]any, len(v))
		var errs gqlerror.List
		for i, e := range v {
			var es gqlerror.List
			out[i], es = project(e, set, vars, append(path, ast.PathIndex(i)))
			errs = append(errs, es...)
		}
		return out, errs
	case map[string]any:
		out := map[string]any{}
		var errs gqlerror.List
		for _, f := range fields(set) {
			p := append(path, ast.PathName(f.Alias))
			if f.Name == "__typename" {
				out[f.Alias] = v["__typename"]
				continue
			}
			fv := v[f.Name]
			if fn, ok := fv.(resolver); ok {
				var e *gqlerror.Error
				if fv, e = fn(f.ArgumentMap(vars)); e != nil {
					e.Path = p
					errs = append(errs, e)
					out[f.Alias] = nil
					continue
				}
			}
			var es gqlerror.List
			out[f.Alias], es = project(fv, f.SelectionSet, vars, p)
			errs = append(errs, es...)
		}
		return out, errs
	}
	if len(set) > 0 {
		return nil, gqlerror.List{gqlerror.ErrorPathf(path, "internal: %T is not an object", v)}
	}
	return v, nil
}

// apiError is a GraphQL error with RunPod's extensions.code.
func apiError(code, format string, args ...any) *gqlerror.Error {
	e := gqlerror.Errorf(format, args...)
	if code != "" {
		e.Extensions = map[string]any{"code": code}
	}
	return e
}
