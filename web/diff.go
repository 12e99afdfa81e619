package web

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/aymanbagabas/go-udiff/lcs"
	"github.com/labstack/echo/v5"
)

// SpecDiff compares the normalized specs of two revisions.
type SpecDiff struct {
	From      string         `json:"from"`
	To        string         `json:"to"`
	Resources []ResourceDiff `json:"resources"`
}

// ResourceDiff is the line diff of one resource's spec (secrets redacted).
type ResourceDiff struct {
	// Key is "kind/name".
	Key string `json:"key"`
	// Change is added, removed, changed or unchanged.
	Change string     `json:"change"`
	Lines  []DiffLine `json:"lines"`
}

// DiffLine is one line of a unified diff: Op is " ", "+" or "-".
type DiffLine struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// diff compares revisions from and to. An empty to means the applied
// revision; an empty from means the revision seen before to.
func (s *Server) diff(c *echo.Context, from, to string) (SpecDiff, error) {
	if s.proj(c).Planner == nil {
		return SpecDiff{}, errUnavailable
	}
	ctx := c.Request().Context()
	if to == "" || from == "" {
		revs, err := s.proj(c).Store.ListRevisions(ctx, 500)
		if err != nil {
			return SpecDiff{}, err
		}
		if to == "" {
			for _, r := range revs {
				if r.Applied {
					to = r.SHA
					break
				}
			}
		}
		if from == "" {
			for i, r := range revs {
				if r.SHA == to {
					for _, older := range revs[i+1:] {
						if older.Valid {
							from = older.SHA
							break
						}
					}
					break
				}
			}
		}
		if from == "" || to == "" {
			return SpecDiff{}, echo.NewHTTPError(http.StatusBadRequest, "give from and to revisions")
		}
	}
	for _, sha := range []string{from, to} {
		if _, err := s.proj(c).Store.GetRevision(ctx, sha); err != nil {
			return SpecDiff{}, err
		}
	}
	a, err := s.proj(c).Planner.SpecsAt(ctx, from)
	if err != nil {
		return SpecDiff{}, err
	}
	b, err := s.proj(c).Planner.SpecsAt(ctx, to)
	if err != nil {
		return SpecDiff{}, err
	}
	return diffSpecs(from, to, a, b), nil
}

// diffSpecs diffs two spec sets, changed resources first, then added,
// removed and unchanged ones, each sorted by key.
func diffSpecs(from, to string, a, b map[string]json.RawMessage) SpecDiff {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	out := SpecDiff{From: from, To: to, Resources: []ResourceDiff{}}
	for k := range keys {
		oldText, newText := "", ""
		if raw, ok := a[k]; ok {
			oldText = redactSpec(raw)
		}
		if raw, ok := b[k]; ok {
			newText = redactSpec(raw)
		}
		rd := ResourceDiff{Key: k}
		_, inA := a[k]
		_, inB := b[k]
		switch {
		case !inA:
			rd.Change = "added"
		case !inB:
			rd.Change = "removed"
		case oldText == newText:
			rd.Change = "unchanged"
		default:
			rd.Change = "changed"
		}
		rd.Lines = lineDiff(splitLines(oldText), splitLines(newText))
		out.Resources = append(out.Resources, rd)
	}
	rank := map[string]int{"changed": 0, "added": 1, "removed": 2, "unchanged": 3}
	sort.Slice(out.Resources, func(i, j int) bool {
		ri, rj := out.Resources[i], out.Resources[j]
		if rank[ri.Change] != rank[rj.Change] {
			return rank[ri.Change] < rank[rj.Change]
		}
		return ri.Key < rj.Key
	})
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineDiff is a line diff of a against b, every line of both in order:
// kept lines with " ", removed with "-", added with "+". The edit script
// comes from go-udiff's Myers LCS, which bounds its own search, so large
// specs cost linear time and space.
func lineDiff(a, b []string) []DiffLine {
	out := make([]DiffLine, 0, max(len(a), len(b)))
	i := 0
	for _, d := range lcs.DiffLines(a, b) {
		for ; i < d.Start; i++ {
			out = append(out, DiffLine{" ", a[i]})
		}
		for ; i < d.End; i++ {
			out = append(out, DiffLine{"-", a[i]})
		}
		for _, l := range b[d.ReplStart:d.ReplEnd] {
			out = append(out, DiffLine{"+", l})
		}
	}
	for ; i < len(a); i++ {
		out = append(out, DiffLine{" ", a[i]})
	}
	return out
}
