package schema

import (
	"strconv"
	"strings"
)

// PosOf returns where the field at path is written in the resource's
// source. path uses Error.Path's form: dotted keys and [i] list indexes,
// e.g. "volumes[0].instance_path" or "resources.gpu". When path itself is
// not written (a default, or a value given in a shorthand form), PosOf
// returns the position of the nearest enclosing value that is, and the
// resource's own position at worst.
func (r *Resource) PosOf(path string) Position {
	if r.doc == nil {
		return r.Pos
	}
	n := r.doc
	for _, seg := range splitFieldPath(path) {
		var next *node
		switch {
		case seg.key != "":
			next = n.get(seg.key)
		case n.kind == nList && seg.index >= 0 && seg.index < len(n.items):
			next = n.items[seg.index]
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.pos
}

// RunConfig returns the part of a task, service or dev environment that the
// run kinds share; nil for fleets, volumes and gateways.
func (r *Resource) RunConfig() *RunConfig {
	switch s := r.Spec.(type) {
	case *Task:
		return &s.RunConfig
	case *Service:
		return &s.RunConfig
	case *DevEnvironment:
		return &s.RunConfig
	}
	return nil
}

// FieldError returns an error at the field at path (see PosOf), its
// message prefixed with path like every error Load reports. Packages that
// check a loaded resource against rules of their own (a server's policy,
// what a runtime supports) report through it, so that their errors read
// and sort like the schema's.
func (r *Resource) FieldError(path, format string, args ...any) *Error {
	return newError(r.PosOf(path), path, format, args...)
}

// fieldSeg is one step of a field path: a mapping key, or a list index
// (key empty).
type fieldSeg struct {
	key   string
	index int
}

// splitFieldPath splits "a.b[2].c" into a, b, [2], c. A malformed index
// becomes a step that matches nothing.
func splitFieldPath(path string) []fieldSeg {
	var out []fieldSeg
	for _, part := range strings.Split(path, ".") {
		if part == "" {
			continue
		}
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			out = append(out, fieldSeg{key: key})
		}
		for rest != "" {
			num, tail, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil {
				i = -1
			}
			out = append(out, fieldSeg{index: i})
			rest = strings.TrimPrefix(tail, "[")
		}
	}
	return out
}
