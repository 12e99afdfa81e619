package schema

// Normalization lives in one file per kind (normalize_task.go,
// normalize_service.go, ...) and per shared part (normalize_run.go,
// normalize_profile.go, normalize_resources.go); this file holds the
// helpers they share.

import "sort"

// sortedSet sorts and dedupes a list whose order carries no meaning, so
// reordering it never shows up as a change.
func sortedSet(l []string) []string {
	if l == nil {
		return nil
	}
	out := append([]string{}, l...)
	sort.Strings(out)
	w := 0
	for i, s := range out {
		if i == 0 || s != out[w-1] {
			out[w] = s
			w++
		}
	}
	return out[:w]
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hoistOptions decodes the `hoist:` block, hoist's own extension to a
// volume or gateway spec (dstack has no such field): `prune: true` lets
// hoist delete the resource when its spec leaves Git, without asking.
func (d *dec) hoistOptions(n *node) *HoistOptions {
	if n.isNull() || !d.object(n, "hoist", fieldsAt("#HoistOptions")...) {
		return nil
	}
	o := &HoistOptions{Prune: d.optBool(n.get("prune"), "hoist.prune", false)}
	if !o.Prune {
		return nil
	}
	return o
}
