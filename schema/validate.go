package schema

import (
	"io/fs"
	"strings"
)

// validator validates documents of one worker; it owns its CUE context
// (CUE values are not safe for concurrent use).
type validator struct {
	cue *cueChecker
}

func newValidator() *validator {
	return &validator{cue: newCueChecker()}
}

// loadFile loads every resource defined by one file.
func (v *validator) loadFile(fsys fs.FS, file string) ([]Resource, Errors) {
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, Errors{{Pos: Position{File: file, Line: 1, Column: 1}, Msg: "cannot read file: " + err.Error()}}
	}
	doc, perr := parseYAML(file, src)
	if perr != nil {
		return nil, Errors{perr}
	}
	r, errs := v.document(doc, file, nameFromFile(file))
	if r == nil {
		return nil, errs
	}
	return []Resource{*r}, errs
}

// loadCue loads the CUE files of one directory: files of one package are
// evaluated together.
func (v *validator) loadCue(fsys fs.FS, files []string) ([]Resource, Errors) {
	srcs := make([][]byte, len(files))
	for i, f := range files {
		src, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, Errors{{Pos: Position{File: f, Line: 1, Column: 1}, Msg: "cannot read file: " + err.Error()}}
		}
		srcs[i] = src
	}
	docs, errs := v.cue.extract(files, srcs)
	if len(errs) > 0 {
		return nil, errs
	}
	var out []Resource
	var all Errors
	for _, d := range docs {
		r, errs := v.document(d.node, d.node.pos.File, d.label)
		all = append(all, errs...)
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, all
}

// document validates and normalizes one resource document.
func (v *validator) document(doc *node, file, fallbackName string) (*Resource, Errors) {
	if doc.kind != nMap {
		return nil, Errors{newError(doc.pos, "", "a spec must be a mapping with a `type` field, got %s", doc.describe())}
	}
	tn := doc.get("type")
	if tn.isNull() {
		return nil, Errors{newError(doc.pos, "", "field \"type\" is required (one of %s)", kindList())}
	}
	if tn.kind != nString || !validKind(tn.str) {
		msg := "invalid type %s: must be one of %s"
		if tn.kind == nString {
			if s := suggest(tn.str, kindStrings()); s != "" {
				return nil, Errors{newError(tn.pos, "type", "invalid type %q: must be one of %s (did you mean %q?)", tn.str, kindList(), s)}
			}
		}
		return nil, Errors{newError(tn.pos, "type", msg, tn.String(), kindList())}
	}
	kind := Kind(tn.str)
	cueErrs := v.cue.check(kind, doc)
	name, spec, js, goErrs := normalize(doc, kind, fallbackName)
	if len(cueErrs) == 0 && len(goErrs) == 0 {
		return &Resource{Kind: kind, Name: name, File: file, Pos: doc.pos, Spec: spec, JSON: js, doc: doc}, nil
	}
	return nil, mergeErrors(doc, cueErrs, goErrs)
}

// mergeErrors combines the CUE schema's errors with the decoder's. The
// decoder knows dstack's grammar and names the exact key, so a CUE error is
// dropped when a decoder error lies within the value it complains about.
func mergeErrors(doc *node, cueErrs, goErrs Errors) Errors {
	out := append(Errors(nil), goErrs...)
	goPos := map[Position]bool{}
	for _, e := range goErrs {
		goPos[e.Pos] = true
	}
	for _, e := range cueErrs {
		if goPos[e.Pos] {
			continue
		}
		if target := nodeAt(doc, e.Pos); target != nil && subtreeHas(target, goPos) {
			continue
		}
		if strings.Contains(e.Msg, "not allowed") && hasNotAllowed(goErrs) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func hasNotAllowed(es Errors) bool {
	for _, e := range es {
		if strings.Contains(e.Msg, "not allowed") {
			return true
		}
	}
	return false
}

// nodeAt finds the value node starting at pos.
func nodeAt(n *node, pos Position) *node {
	if n == nil {
		return nil
	}
	if n.pos == pos {
		return n
	}
	for i, k := range n.keys {
		if k.pos == pos {
			return n.vals[i]
		}
		if x := nodeAt(n.vals[i], pos); x != nil {
			return x
		}
	}
	for _, it := range n.items {
		if x := nodeAt(it, pos); x != nil {
			return x
		}
	}
	return nil
}

func subtreeHas(n *node, set map[Position]bool) bool {
	if n == nil {
		return false
	}
	if set[n.pos] {
		return true
	}
	for i, k := range n.keys {
		if set[k.pos] || subtreeHas(n.vals[i], set) {
			return true
		}
	}
	for _, it := range n.items {
		if subtreeHas(it, set) {
			return true
		}
	}
	return false
}

func validKind(s string) bool {
	for _, k := range Kinds {
		if string(k) == s {
			return true
		}
	}
	return false
}

func kindStrings() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return out
}

func kindList() string { return quoteList(kindStrings()) }
