package schema

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
)

// CUE evaluation cannot be interrupted (cuelang.org/go takes no context),
// so it is bounded three ways: sources are refused before evaluation when a
// comprehension visibly iterates over more values than a list may hold; an
// evaluation runs in its own goroutine and is abandoned when the load's
// context ends; and abandoned evaluations keep one of cueSlots until they
// finish, so that bad revisions cannot pile up work, while their content is
// refused at once afterwards.

// cueSlots bounds the CUE evaluations running at once, abandoned ones
// included.
var cueSlots = make(chan struct{}, 2)

// abandoned remembers the content of CUE units whose evaluation outlived a
// load's deadline.
var abandoned = struct {
	sync.Mutex
	m map[[sha256.Size]byte]bool
}{m: map[[sha256.Size]byte]bool{}}

const abandonedMax = 1000

func unitKey(files []string, srcs [][]byte) [sha256.Size]byte {
	h := sha256.New()
	for i, f := range files {
		fmt.Fprintf(h, "%d:%s%d:", len(f), f, len(srcs[i]))
		h.Write(srcs[i])
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// loadCueContext loads the CUE files of one directory under ctx: files of
// one package are evaluated together. When ctx ends during the evaluation
// it is abandoned, and abandonedV reports that v is still in use by it.
func (v *validator) loadCueContext(ctx context.Context, fsys fs.FS, files []string) (res []Resource, wf []cueDoc, errs Errors, abandonedV bool) {
	srcs := make([][]byte, len(files))
	parsed := make([]*ast.File, len(files))
	for i, f := range files {
		src, err := readSpec(fsys, f)
		if err != nil {
			return nil, nil, Errors{err}, false
		}
		srcs[i] = src
		pf, perr := parser.ParseFile(f, src)
		if perr != nil {
			errs = append(errs, cueErrors(f, perr)...)
			continue
		}
		if e := checkComprehensions(pf); e != nil {
			errs = append(errs, e)
			continue
		}
		parsed[i] = pf
	}
	if len(errs) > 0 {
		return nil, nil, errs, false
	}
	key := unitKey(files, srcs)
	abandoned.Lock()
	bad := abandoned.m[key]
	abandoned.Unlock()
	if bad {
		return nil, nil, Errors{{Pos: Position{File: files[0], Line: 1, Column: 1},
			Msg: "CUE evaluation of these files outlived the deadline of an earlier load; refused (lists hold at most " +
				strconv.Itoa(MaxListItems) + " items)"}}, false
	}
	select {
	case cueSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, Errors{{Pos: Position{File: files[0], Line: 1, Column: 1},
			Msg: "no CUE evaluation slot before the deadline: earlier revisions' evaluations are still running"}}, false
	}
	type result struct {
		docs []cueDoc
		errs Errors
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-cueSlots }()
		docs, errs := v.cue.extract(files, parsed)
		done <- result{docs, errs}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		abandoned.Lock()
		if len(abandoned.m) >= abandonedMax {
			clear(abandoned.m)
		}
		abandoned.m[key] = true
		abandoned.Unlock()
		why := "cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "stopped at the revision's deadline"
		}
		return nil, nil, Errors{{Pos: Position{File: files[0], Line: 1, Column: 1},
			Msg: "CUE evaluation " + why + "; refused (lists hold at most " + strconv.Itoa(MaxListItems) + " items)"}}, true
	}
	if len(r.errs) > 0 {
		return nil, nil, r.errs, false
	}
	for _, d := range r.docs {
		if d.wf != "" {
			wf = append(wf, d)
			continue
		}
		rs, es := v.document(ctx, d.node, d.node.pos.File, d.label)
		errs = append(errs, es...)
		if rs != nil {
			res = append(res, *rs)
		}
	}
	return res, wf, errs, false
}

// checkComprehensions refuses, before evaluation, a comprehension whose
// sources visibly hold more values than a list or mapping may (literal
// lists and structs, list.Range, list.Repeat, references to those), alone
// or multiplied by the comprehensions around it. What cannot be sized
// statically is bounded by the load's deadline.
func checkComprehensions(f *ast.File) *Error {
	var err *Error
	limit := float64(max(MaxListItems, MaxMapKeys))
	var walk func(n ast.Node, outer float64)
	walk = func(n ast.Node, outer float64) {
		ast.Walk(n, func(x ast.Node) bool {
			if err != nil {
				return false
			}
			c, ok := x.(*ast.Comprehension)
			if !ok {
				return true
			}
			iters := comprehensionIterations(c, 0)
			if total := iters * outer; iters > limit || total > MaxValues {
				pos := cuePos(f.Filename, c.Pos())
				err = &Error{Pos: pos, Msg: fmt.Sprintf("comprehension iterates over %.0f values, more than the limit of %d per list",
					total, MaxListItems)}
				return false
			}
			for _, cl := range c.Clauses {
				walk(cl, outer)
			}
			walk(c.Value, outer*max(iters, 1))
			return false
		}, nil)
	}
	walk(f, 1)
	return err
}

// comprehensionIterations multiplies the sizes of a comprehension's for
// clauses.
func comprehensionIterations(c *ast.Comprehension, depth int) float64 {
	n := 1.0
	for _, cl := range c.Clauses {
		if fc, ok := cl.(*ast.ForClause); ok {
			n *= staticSize(fc.Source, depth+1)
		}
	}
	return n
}

// staticSize estimates how many values iterating over e yields; 1 when it
// cannot tell.
func staticSize(e ast.Expr, depth int) float64 {
	if depth > 20 {
		return 1
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		return staticSize(x.X, depth+1)
	case *ast.ListLit:
		return elemsSize(x.Elts, depth)
	case *ast.StructLit:
		return elemsSize(x.Elts, depth)
	case *ast.Ident:
		// The parser resolves a reference to the value it names.
		if v, ok := x.Node.(ast.Expr); ok && v != ast.Expr(x) {
			return staticSize(v, depth+1)
		}
	case *ast.BinaryExpr:
		a, b := staticSize(x.X, depth+1), staticSize(x.Y, depth+1)
		switch x.Op.String() {
		case "+":
			return a + b
		case "*":
			if n, ok := intLit(x.Y); ok {
				return a * n
			}
			if n, ok := intLit(x.X); ok {
				return b * n
			}
		}
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		if !ok {
			return 1
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || pkg.Name != "list" {
			return 1
		}
		switch {
		case isSel(sel, "Range") && len(x.Args) == 3:
			from, ok1 := intLit(x.Args[0])
			to, ok2 := intLit(x.Args[1])
			step, ok3 := intLit(x.Args[2])
			if ok1 && ok2 && ok3 && step != 0 {
				return math.Max(0, math.Ceil((to-from)/step))
			}
		case isSel(sel, "Repeat") && len(x.Args) == 2:
			if n, ok := intLit(x.Args[1]); ok {
				return staticSize(x.Args[0], depth+1) * n
			}
		case isSel(sel, "Concat") && len(x.Args) == 1:
			if l, ok := x.Args[0].(*ast.ListLit); ok {
				s := 0.0
				for _, el := range l.Elts {
					s += staticSize(el, depth+1)
				}
				return s
			}
		}
	}
	return 1
}

func isSel(s *ast.SelectorExpr, name string) bool {
	id, ok := s.Sel.(*ast.Ident)
	return ok && id.Name == name
}

func elemsSize[T ast.Node](elts []T, depth int) float64 {
	n := 0.0
	for _, el := range elts {
		switch y := any(el).(type) {
		case *ast.Comprehension:
			n += comprehensionIterations(y, depth+1)
		case *ast.Ellipsis:
		default:
			n++
		}
	}
	return n
}

// intLit reads an integer literal (with CUE's separators and multipliers),
// possibly negated.
func intLit(e ast.Expr) (float64, bool) { return intExpr(e, 0) }

func intExpr(e ast.Expr, depth int) (float64, bool) {
	if depth > 20 {
		return 0, false
	}
	neg := 1.0
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op.String() == "-" {
		neg, e = -1, u.X
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		return intExpr(x.X, depth+1)
	case *ast.Ident:
		if v, ok := x.Node.(ast.Expr); ok && v != e {
			n, ok := intExpr(v, depth+1)
			return neg * n, ok
		}
	case *ast.BinaryExpr:
		a, ok1 := intExpr(x.X, depth+1)
		b, ok2 := intExpr(x.Y, depth+1)
		if ok1 && ok2 {
			switch x.Op.String() {
			case "+":
				return neg * (a + b), true
			case "-":
				return neg * (a - b), true
			case "*":
				return neg * a * b, true
			}
		}
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok {
		return 0, false
	}
	var ni literal.NumInfo
	if literal.ParseNum(lit.Value, &ni) != nil || !ni.IsInt() {
		return 0, false
	}
	f, err := strconv.ParseFloat(ni.String(), 64)
	if err != nil {
		return 0, false
	}
	return neg * f, true
}
