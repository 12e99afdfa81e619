package web

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// previewMarker is the hidden line that identifies hoist's own comment on
// a pull request (or note on a merge request), so that hoist finds and
// edits it even when the stored comment id is lost.
const previewMarker = "<!-- hoist:plan -->"

// previewMaxBytes bounds a preview comment: GitHub refuses comment bodies
// longer than 65,536 characters (REST API, "Create an issue comment");
// GitLab's notes allow 1,000,000. Rows beyond it are summarised.
const previewMaxBytes = 60000

// projectPlan is one project's section of a preview comment: a server
// reconciling several projects (possibly from one repository) posts one
// comment with a section per project. Name is empty for a server with one
// project, and the section then has no heading.
type projectPlan struct {
	Name string
	// Plan is the project's plan; nil when planning failed (Error says
	// why).
	Plan  *Plan
	Error string
}

// previewHead says where the planned revision lives, for the heading and
// the links from errors to the files of the pull request.
type previewHead struct {
	// Provider is "github" or "gitlab".
	Provider string
	// RepoURL is the repository's web address (https://github.com/o/r,
	// https://gitlab.com/g/p); empty leaves errors unlinked.
	RepoURL string
	// SHA is the head commit of the pull request.
	SHA string
	// DashboardURL is hoist's page of the pull request's plan; empty
	// leaves the link out.
	DashboardURL string
}

// positionRE matches the "path:line:col: message" of hoist's errors and
// warnings.
var positionRE = regexp.MustCompile(`^([^:]+):(\d+):(\d+): (.*)$`)

// fileLink is the web address of path at line in the head commit: GitHub's
// /blob/<sha>/<path>#L<line> and GitLab's /-/blob/<sha>/<path>#L<line>.
func (h previewHead) fileLink(path, line string) string {
	if h.RepoURL == "" || h.SHA == "" {
		return ""
	}
	esc := make([]string, 0, 4)
	for _, seg := range strings.Split(path, "/") {
		esc = append(esc, url.PathEscape(seg))
	}
	blob := "/blob/"
	if h.Provider == "gitlab" {
		blob = "/-/blob/"
	}
	return strings.TrimRight(h.RepoURL, "/") + blob + h.SHA + "/" + strings.Join(esc, "/") + "#L" + line
}

// findingLine renders one error or warning: its position linked to the
// file in the pull request when it has one.
func (h previewHead) findingLine(e string) string {
	m := positionRE.FindStringSubmatch(e)
	if m == nil {
		return "- " + mdText(e)
	}
	pos := m[1] + ":" + m[2] + ":" + m[3]
	if link := h.fileLink(m[1], m[2]); link != "" {
		return fmt.Sprintf("- [`%s`](%s): %s", pos, link, mdText(m[4]))
	}
	return fmt.Sprintf("- `%s`: %s", pos, mdText(m[4]))
}

// mdText escapes text for a Markdown table cell or list item: pipes would
// end a cell, and newlines the row; angle brackets could open HTML.
func mdText(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", "", "<", "&lt;", ">", "&gt;").Replace(s)
}

// dollars renders a price per hour; nil is unknown.
func dollars(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("$%.2f", *v)
}

// previewBudgetLine is the line a plan's budget adds under its spend
// (empty: the project has no budget): the limits, the month's spend, and
// the overrun that holds the plan.
func previewBudgetLine(pl *Plan) string {
	bc := pl.Budget
	if bc == nil || (bc.MaxPerHour <= 0 && bc.MaxPerMonth <= 0) {
		return ""
	}
	var parts []string
	if bc.MaxPerHour > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f/h", bc.MaxPerHour))
	}
	if bc.MaxPerMonth > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f a month ($%.2f spent)", bc.MaxPerMonth, bc.MonthToDate))
	}
	line := fmt.Sprintf("**Budget of project %s:** %s", mdText(bc.Project), strings.Join(parts, ", "))
	switch {
	case bc.OverPerHour > 0:
		line += fmt.Sprintf(" — :warning: over by $%.2f/h", bc.OverPerHour)
	case bc.MonthSpent:
		line += " — :warning: this month's budget is spent"
	default:
		line += " — within budget"
	}
	return line
}

// renderPreview renders the comment hoist posts on a pull request: the
// marker, a heading naming the head commit, then one section per project —
// a table of the resources that change (action, what changes, $/h before →
// after), the spend before → after, the budget line, and every validation
// error and warning with its path:line:col linked to the file at the head
// commit. The body stays under previewMaxBytes.
func renderPreview(h previewHead, projects []projectPlan) string {
	var b strings.Builder
	b.WriteString(previewMarker + "\n")
	short := h.SHA
	if len(short) > 12 {
		short = short[:12]
	}
	fmt.Fprintf(&b, "### hoist plan for `%s`\n\n", short)
	budget := previewMaxBytes - 2000
	for _, p := range projects {
		if p.Name != "" {
			fmt.Fprintf(&b, "#### Project `%s`\n\n", mdText(p.Name))
		}
		renderProject(&b, h, p, budget-b.Len())
	}
	if h.DashboardURL != "" {
		fmt.Fprintf(&b, "[Plan on the hoist dashboard](%s)\n", h.DashboardURL)
	}
	return b.String()
}

// writeFindings lists errors or warnings, one linked line each, until the
// project's section (begun at start) passes room; the rest is counted.
func (h previewHead) writeFindings(b *strings.Builder, findings []string, start, room int) {
	for i, f := range findings {
		if b.Len()-start > room {
			fmt.Fprintf(b, "- … and %d more\n", len(findings)-i)
			return
		}
		b.WriteString(h.findingLine(f) + "\n")
	}
}

// renderProject writes one project's section: its errors, or its table of
// changes, spend, budget line, hold and warnings, within room bytes.
func renderProject(b *strings.Builder, h previewHead, p projectPlan, room int) {
	start := b.Len()
	if p.Plan == nil {
		fmt.Fprintf(b, ":x: **Planning failed:** %s\n\n", mdText(p.Error))
		return
	}
	pl := p.Plan
	if len(pl.Errors) > 0 {
		fmt.Fprintf(b, ":x: **Invalid: %d error(s).** Nothing would be applied.\n\n", len(pl.Errors))
		h.writeFindings(b, pl.Errors, start, room)
		b.WriteString("\n")
		return
	}
	counts := map[string]int{}
	var changed []Change
	for _, c := range pl.Changes {
		counts[c.Action]++
		if c.Action != "none" {
			changed = append(changed, c)
		}
	}
	if len(changed) == 0 {
		fmt.Fprintf(b, "No changes (%d unchanged).\n\n", counts["none"])
	} else {
		b.WriteString("| Resource | Action | What changes | $/h before → after |\n|---|---|---|---|\n")
		for i, c := range changed {
			if b.Len()-start > room {
				fmt.Fprintf(b, "| … | | %d more change(s) | |\n", len(changed)-i)
				break
			}
			fmt.Fprintf(b, "| `%s/%s` | %s | %s | %s → %s |\n", c.Kind, mdText(c.Name), c.Action,
				mdText(c.Detail), dollars(c.CostBefore), dollars(c.CostAfter))
		}
		fmt.Fprintf(b, "\n**Plan:** %d to create, %d to update, %d to replace, %d to delete, %d unchanged.\n",
			counts["create"], counts["update"], counts["replace"], counts["delete"], counts["none"])
	}
	fmt.Fprintf(b, "**Estimated spend:** $%.2f/h → $%.2f/h\n", pl.CostBefore, pl.CostAfter)
	if line := previewBudgetLine(pl); line != "" {
		b.WriteString(line + "\n")
	}
	if pl.Held {
		fmt.Fprintf(b, "\n:pause_button: **Held:** applying waits for confirmation (%s).\n", mdText(strings.Join(pl.HeldReasons, "; ")))
	}
	if len(pl.Warnings) > 0 {
		fmt.Fprintf(b, "\n%d warning(s):\n", len(pl.Warnings))
		h.writeFindings(b, pl.Warnings, start, room)
	}
	b.WriteString("\n")
}
