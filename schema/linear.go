package schema

import (
	"context"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
)

// chunkItems is how many elements of one list (or keys of one mapping)
// are unified with the schema at once. CUE inserts the elements of a list
// or struct one by one, each time searching the ones already there, so one
// unification costs the square of the length; checking long collections
// chunk by chunk keeps validation linear in the size of the spec.
const chunkItems = 64

// checkFieldLinear is checkField for values of any size. The schema holds
// no constraint across the elements of a list or the keys of a mapping, so
// a collection longer than chunkItems is checked as several values that
// each hold one chunk of it: first the whole value with the collection cut
// to its first chunk, then, for every further chunk, a slimmed copy (other
// lists cut to their first element) with the collection replaced by that
// chunk, keeping only the errors inside the collection.
func (c *cueChecker) checkFieldLinear(ctx context.Context, fv cue.Value, val *node, field string) []relErr {
	p := bigCollection(val, nil)
	if p == nil {
		return c.checkField(fv, val, field)
	}
	target := nodeAtPath(val, p)
	out := c.checkFieldLinear(ctx, fv, replaceAt(val, p, 0, func(*node) *node { return chunkOf(target, 0) }), field)
	seen := map[string]bool{}
	for _, re := range out {
		seen[relKey(re)] = true
	}
	skeleton := slim(val, p, 0)
	for lo := chunkItems; lo < collectionLen(target); lo += chunkItems {
		if ctx.Err() != nil {
			return out
		}
		v := replaceAt(skeleton, p, 0, func(*node) *node { return chunkOf(target, lo) })
		for _, re := range c.checkFieldLinear(ctx, fv, v, field) {
			if len(re.path) <= len(p) || !hasPrefix(re.path, p) {
				// Outside the collection: the first check reported it,
				// unless this chunk caused it (a disjunction failing
				// above the element at fault).
				if k := relKey(re); !seen[k] {
					seen[k] = true
					out = append(out, re)
				}
				continue
			}
			if target.kind == nList {
				i, err := strconv.Atoi(re.path[len(p)])
				if err != nil {
					continue
				}
				re.path = append(append(append([]string(nil), p...), strconv.Itoa(i+lo)), re.path[len(p)+1:]...)
			} else if re.loc == locParent && len(re.path) == len(p)+1 && target.has(re.path[len(p)]) {
				continue // a required key that lies in another chunk
			}
			out = append(out, re)
		}
	}
	return out
}

// bigCollection returns the path (below val) of the first list or mapping
// with more than chunkItems elements, outermost first; nil when none.
func bigCollection(n *node, path []string) []string {
	switch n.kind {
	case nList:
		if len(n.items) > chunkItems {
			return append([]string{}, path...)
		}
		for i, it := range n.items {
			if p := bigCollection(it, append(path, strconv.Itoa(i))); p != nil {
				return p
			}
		}
	case nMap:
		if len(n.keys) > chunkItems {
			return append([]string{}, path...)
		}
		for i, k := range n.keys {
			if p := bigCollection(n.vals[i], append(path, k.str)); p != nil {
				return p
			}
		}
	}
	return nil
}

func collectionLen(n *node) int {
	if n.kind == nList {
		return len(n.items)
	}
	return len(n.keys)
}

// chunkOf is the collection n cut to chunkItems elements from lo.
func chunkOf(n *node, lo int) *node {
	cp := *n
	hi := min(lo+chunkItems, collectionLen(n))
	if n.kind == nList {
		cp.items = n.items[lo:hi]
	} else {
		cp.keys, cp.vals = n.keys[lo:hi], n.vals[lo:hi]
	}
	return &cp
}

// nodeAtPath follows path (keys and list indexes) from n.
func nodeAtPath(n *node, path []string) *node {
	for _, p := range path {
		if n.kind == nList {
			i, _ := strconv.Atoi(p)
			n = n.items[i]
		} else {
			n = n.get(p)
		}
	}
	return n
}

// replaceAt copies n along path and puts f(old) at its end.
func replaceAt(n *node, path []string, d int, f func(*node) *node) *node {
	if d == len(path) {
		return f(n)
	}
	cp := *n
	if n.kind == nList {
		i, _ := strconv.Atoi(path[d])
		cp.items = append([]*node(nil), n.items...)
		cp.items[i] = replaceAt(n.items[i], path, d+1, f)
		return &cp
	}
	cp.vals = append([]*node(nil), n.vals...)
	for i, k := range n.keys {
		if k.str == path[d] {
			cp.vals[i] = replaceAt(n.vals[i], path, d+1, f)
			break
		}
	}
	return &cp
}

// slim copies n with every list off path (from depth d) cut to its first
// element: enough for the schema to pick the same branches, and small.
func slim(n *node, path []string, d int) *node {
	switch n.kind {
	case nList:
		cp := *n
		onPath := d < len(path)
		idx := -1
		if onPath {
			idx, _ = strconv.Atoi(path[d])
		}
		cp.items = nil
		for i, it := range n.items {
			switch {
			case i == idx:
				cp.items = append(cp.items, slim(it, path, d+1))
			case !onPath && i > 0:
				continue
			default:
				cp.items = append(cp.items, slim(it, nil, 0))
			}
		}
		return &cp
	case nMap:
		cp := *n
		cp.vals = make([]*node, len(n.vals))
		for i, k := range n.keys {
			if d < len(path) && k.str == path[d] {
				cp.vals[i] = slim(n.vals[i], path, d+1)
			} else {
				cp.vals[i] = slim(n.vals[i], nil, 0)
			}
		}
		return &cp
	}
	return n
}

// relKey identifies an error for deduplication across chunks.
func relKey(re relErr) string {
	return strings.Join(re.path, "\x00") + "\x01" + re.msg + "\x01" + strconv.Itoa(int(re.loc))
}

func hasPrefix(p, prefix []string) bool {
	for i, s := range prefix {
		if p[i] != s {
			return false
		}
	}
	return true
}
