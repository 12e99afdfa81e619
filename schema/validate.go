package schema

import (
	"context"
	"io"
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

// readSpec reads one spec file, refusing one over MaxFileBytes without
// reading it whole.
func readSpec(fsys fs.FS, file string) ([]byte, *Error) {
	unreadable := func(err error) *Error {
		return &Error{Pos: Position{File: file, Line: 1, Column: 1}, Msg: "cannot read file: " + err.Error()}
	}
	f, err := fsys.Open(file)
	if err != nil {
		return nil, unreadable(err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > MaxFileBytes {
		return nil, fileLimitError(file, info.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, unreadable(err)
	}
	if len(b) > MaxFileBytes {
		return nil, fileLimitError(file, int64(len(b)))
	}
	return b, nil
}

// loadFile loads the resource defined by one YAML file whose content is
// src.
func (v *validator) loadFile(ctx context.Context, file string, src []byte) ([]Resource, Errors) {
	doc, perr := parseYAML(file, src)
	if perr != nil {
		return nil, Errors{perr}
	}
	r, errs := v.document(ctx, doc, file, nameFromFile(file))
	if r == nil {
		return nil, errs
	}
	return []Resource{*r}, errs
}

// document validates and normalizes one resource document.
func (v *validator) document(ctx context.Context, doc *node, file, fallbackName string) (*Resource, Errors) {
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
	if e := checkSizes(doc); e != nil {
		return nil, Errors{e}
	}
	cueErrs := v.cue.check(ctx, kind, doc)
	name, spec, js, goErrs := normalize(doc, kind, fallbackName)
	if len(cueErrs) == 0 && len(goErrs) == 0 && len(js) > MaxResourceBytes {
		goErrs = Errors{newError(doc.pos, "", "the normalized spec is %s, more than the limit of %s per resource",
			byteSize(int64(len(js))), byteSize(MaxResourceBytes))}
	}
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
	var idx *posIndex
	notAllowed := hasNotAllowed(goErrs)
	for _, e := range cueErrs {
		if goPos[e.Pos] {
			continue
		}
		if idx == nil {
			idx = indexPositions(doc, goPos)
		}
		if target := idx.at[e.Pos]; target != nil && idx.hasGo[target] {
			continue
		}
		if notAllowed && strings.Contains(e.Msg, "not allowed") {
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

// posIndex maps source positions to the value nodes starting there (a
// key's position maps to its value), and marks the nodes whose subtree
// holds a decoder error; built in one walk so that merging stays linear.
type posIndex struct {
	at    map[Position]*node
	hasGo map[*node]bool
}

func indexPositions(doc *node, goPos map[Position]bool) *posIndex {
	idx := &posIndex{at: map[Position]*node{}, hasGo: map[*node]bool{}}
	put := func(p Position, n *node) {
		if _, ok := idx.at[p]; !ok {
			idx.at[p] = n
		}
	}
	var walk func(n *node) bool
	walk = func(n *node) bool {
		if n == nil {
			return false
		}
		put(n.pos, n)
		has := goPos[n.pos]
		for i, k := range n.keys {
			put(k.pos, n.vals[i])
			if goPos[k.pos] {
				has = true
			}
			if walk(n.vals[i]) {
				has = true
			}
		}
		for _, it := range n.items {
			if walk(it) {
				has = true
			}
		}
		if has {
			idx.hasGo[n] = true
		}
		return has
	}
	walk(doc)
	return idx
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
