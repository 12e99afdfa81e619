package schema

import (
	"fmt"
	"sort"
	"strings"
)

// Position is a place in a spec file: a slash path relative to the loaded
// root, and a 1-based line and column.
type Position struct {
	File   string
	Line   int
	Column int
}

// String formats p as file:line:col.
func (p Position) String() string {
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Error is one problem in a spec, at the offending value (for a missing
// required field, at its parent).
type Error struct {
	Pos Position
	// Path is the dotted field path inside the resource, e.g.
	// "resources.gpu" or "env[2]"; empty for file-level problems.
	Path string
	// Msg is the human-readable message; it starts with Path when Path is set.
	Msg string
}

// Error formats e as "file:line:col: msg".
func (e *Error) Error() string {
	return e.Pos.String() + ": " + e.Msg
}

// Errors is a list of spec errors in a stable order (file, line, column,
// message). It implements error.
type Errors []*Error

// Error joins all errors, one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Sort orders es by file, line, column, then message, and drops exact
// duplicates.
func (es *Errors) Sort() {
	s := *es
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Column != b.Pos.Column {
			return a.Pos.Column < b.Pos.Column
		}
		return a.Msg < b.Msg
	})
	out := s[:0]
	for i, e := range s {
		if i > 0 && *e == *s[i-1] {
			continue
		}
		out = append(out, e)
	}
	*es = out
}

func newError(pos Position, path, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return &Error{Pos: pos, Path: path, Msg: msg}
}
