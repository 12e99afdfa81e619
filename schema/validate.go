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
	if strings.HasSuffix(file, ".cue") {
		docs, errs := v.cue.extract(file, src)
		if len(errs) > 0 {
			return nil, errs
		}
		var out []Resource
		var all Errors
		for _, d := range docs {
			r, errs := v.document(d.node, file, d.label)
			all = append(all, errs...)
			if r != nil {
				out = append(out, *r)
			}
		}
		return out, all
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
	if errs := v.cue.check(kind, doc); len(errs) > 0 {
		return nil, errs
	}
	name, spec, js, errs := normalize(doc, kind, fallbackName)
	if len(errs) > 0 {
		return nil, errs
	}
	return &Resource{Kind: kind, Name: name, File: file, Pos: doc.pos, Spec: spec, JSON: js}, nil
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
