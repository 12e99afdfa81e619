package web

import (
	"fmt"
	"slices"
	"strings"
)

// dagChart is a workflow's jobs drawn as their graph: one column per
// depth of depends_on (a job right of every job it waits for), one box per
// job with its status, an edge per dependency.
type dagChart struct {
	Width, Height int
	Nodes         []dagNode
	Edges         []dagEdge
}

// dagNode is one job's box.
type dagNode struct {
	X, Y         int
	Name, Status string
	// Href opens the job's logs.
	Href string
}

// dagEdge joins a dependency's box to its dependent's.
type dagEdge struct{ X1, Y1, X2, Y2 int }

// Sizes of the drawing, in pixels.
const (
	dagBoxW, dagBoxH = 150, 36
	dagColW, dagRowH = 200, 50
	dagPad           = 10
)

// workflowDAG lays out a workflow run's jobs (their latest submissions;
// jobs come newest first) by depth: a job without dependencies is at
// depth 0, any other one column right of its deepest dependency.
func workflowDAG(run string, jobs []Job) dagChart {
	latest := map[string]Job{}
	var order []string
	for _, j := range slices.Backward(jobs) { // oldest first: the provider's order
		if j.WorkflowJob == "" {
			continue
		}
		if _, ok := latest[j.WorkflowJob]; !ok {
			order = append(order, j.WorkflowJob)
		}
		if prev, ok := latest[j.WorkflowJob]; !ok || j.SubmissionNum >= prev.SubmissionNum {
			latest[j.WorkflowJob] = j
		}
	}
	depth := map[string]int{}
	var depthOf func(name string, seen map[string]bool) int
	depthOf = func(name string, seen map[string]bool) int {
		if d, ok := depth[name]; ok {
			return d
		}
		if seen[name] { // a cycle cannot be loaded; never loop on one
			return 0
		}
		seen[name] = true
		d := 0
		for _, dep := range latest[name].DependsOn {
			if _, ok := latest[dep]; ok {
				d = max(d, depthOf(dep, seen)+1)
			}
		}
		depth[name] = d
		return d
	}
	rows := map[int]int{}
	pos := map[string]dagNode{}
	var ch dagChart
	for _, name := range order {
		d := depthOf(name, map[string]bool{})
		j := latest[name]
		n := dagNode{X: dagPad + d*dagColW, Y: dagPad + rows[d]*dagRowH, Name: name, Status: j.Status,
			Href: "/runs/" + run + "?job=" + j.ID + "#logs"}
		rows[d]++
		pos[name] = n
		ch.Nodes = append(ch.Nodes, n)
		ch.Width = max(ch.Width, n.X+dagBoxW+dagPad)
		ch.Height = max(ch.Height, n.Y+dagBoxH+dagPad)
	}
	for _, name := range order {
		to := pos[name]
		for _, dep := range latest[name].DependsOn {
			if from, ok := pos[dep]; ok {
				ch.Edges = append(ch.Edges, dagEdge{X1: from.X + dagBoxW, Y1: from.Y + dagBoxH/2, X2: to.X, Y2: to.Y + dagBoxH/2})
			}
		}
	}
	return ch
}

// dagClass is a job box's class: its status's, as the timeline colours
// them.
func dagClass(status string) string { return "dag-node seg-" + strings.ReplaceAll(status, " ", "-") }

// Summary describes a planned workflow job in one line: what it waits
// for, its master, its artifacts and its price (`hoist plan` and the
// history page print it).
func (j ChangeJob) Summary() string {
	var parts []string
	if len(j.DependsOn) > 0 {
		parts = append(parts, "after "+strings.Join(j.DependsOn, ", "))
	}
	if j.Master != "" {
		parts = append(parts, "master "+j.Master)
	}
	if len(j.Artifacts) > 0 {
		parts = append(parts, "artifacts "+strings.Join(j.Artifacts, ", "))
	}
	if j.PricePerHour != nil {
		parts = append(parts, fmt.Sprintf("$%.4g/h", *j.PricePerHour))
	}
	return strings.Join(parts, "; ")
}
