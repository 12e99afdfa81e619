package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
)

// PlanRequest is the body of POST /api/v1/plan: either Files (path to
// content, the whole desired state) or a Ref and SHA of the repository.
type PlanRequest struct {
	Files map[string]string `json:"files"`
	Ref   string            `json:"ref"`
	SHA   string            `json:"sha"`
}

func (s *Server) apiPlan(c *echo.Context) error {
	if s.proj(c).Planner == nil {
		return errUnavailable
	}
	var req PlanRequest
	body := http.MaxBytesReader(c.Response(), c.Request().Body, planBodyMax)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "body is larger than the limit of "+strconv.Itoa(planBodyMax>>20)+" MiB")
		}
		return echo.NewHTTPError(http.StatusBadRequest, "body must be JSON: {\"files\": {path: content}} or {\"ref\", \"sha\"}")
	}
	// The request's context ends when the client leaves, and the planner
	// stops validating then.
	ctx := c.Request().Context()
	var plan Plan
	var err error
	switch {
	case len(req.Files) > 0:
		files := make(map[string][]byte, len(req.Files))
		for k, v := range req.Files {
			files[k] = []byte(v)
		}
		plan, err = s.proj(c).Planner.PlanFiles(ctx, files)
	case req.SHA != "":
		plan, err = s.proj(c).Planner.PlanRevision(ctx, req.Ref, req.SHA)
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "give files or sha")
	}
	if err != nil {
		return &echo.HTTPError{Code: http.StatusUnprocessableEntity, Message: err.Error()}
	}
	plan.Errors = nonNil(plan.Errors)
	plan.Changes = nonNil(plan.Changes)
	plan.Warnings = nonNil(plan.Warnings)
	return c.JSON(http.StatusOK, plan)
}

func (s *Server) apiPulls(c *echo.Context) error {
	return c.JSON(http.StatusOK, s.pulls(c))
}

// PRPlan is the plan hoist computed for a pull (or merge) request's head.
type PRPlan struct {
	Provider string `json:"provider"`
	Number   int    `json:"number"`
	Title    string `json:"title"`
	URL      string `json:"url,omitempty"`
	Repo     string `json:"repo"`
	// RepoURL is the repository's web address; the preview links errors
	// to its files at the head commit.
	RepoURL string    `json:"repo_url,omitempty"`
	HeadSHA string    `json:"head_sha"`
	HeadRef string    `json:"head_ref"`
	BaseRef string    `json:"base_ref"`
	Ref     string    `json:"ref"`
	State   string    `json:"state"` // planning | planned | invalid | error
	Error   string    `json:"error,omitempty"`
	Plan    *Plan     `json:"plan,omitempty"`
	Posted  string    `json:"posted,omitempty"` // commit status result, when posted
	Updated time.Time `json:"updated_at"`
	// CommentID is the forge's id of the comment (GitHub) or note
	// (GitLab) the preview was posted in; each push edits it.
	CommentID int64 `json:"comment_id,omitempty"`
	// Projects are the plans of the other projects the pull request
	// concerns (hookProjects: those reading the same repository and
	// branch, e.g. other directories of a monorepo); Plan and Error are
	// the default project's.
	Projects []ProjectPRPlan `json:"projects,omitempty"`
}

// ProjectPRPlan is one more project's plan of a pull request's head.
type ProjectPRPlan struct {
	Project string `json:"project"`
	Plan    *Plan  `json:"plan,omitempty"`
	Error   string `json:"error,omitempty"`
}

// prPlans keeps the latest plan per pull request for the dashboard, in
// shared (the database, seen by every server) or, without it, in memory.
type prPlans struct {
	mu sync.Mutex
	m  map[string]PRPlan
	// posts holds one lock per pull request while its preview is posted.
	posts map[string]*sync.Mutex

	shared Shared
	log    *slog.Logger
}

func newPRPlans() *prPlans { return &prPlans{m: map[string]PRPlan{}} }

func (p *prPlans) key(provider string, n int) string { return fmt.Sprintf("%s#%d", provider, n) }

func (p *prPlans) put(pr PRPlan) {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := p.shared.PutPRPlan(ctx, pr, false); err != nil {
			p.log.Warn("pr_plan_store_failed", "number", pr.Number, "error", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.key(pr.Provider, pr.Number)
	if cur, ok := p.m[k]; ok && pr.CommentID == 0 {
		pr.CommentID = cur.CommentID
	}
	p.m[k] = pr
	if len(p.m) > maxPRPlans {
		oldest := ""
		for k, v := range p.m {
			if oldest == "" || v.Updated.Before(p.m[oldest].Updated) {
				oldest = k
			}
		}
		delete(p.m, oldest)
	}
}

// update replaces the stored plan only while it is still for head sha.
func (p *prPlans) update(pr PRPlan) {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := p.shared.PutPRPlan(ctx, pr, true); err != nil {
			p.log.Warn("pr_plan_store_failed", "number", pr.Number, "error", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.key(pr.Provider, pr.Number)
	if cur, ok := p.m[k]; ok && cur.HeadSHA == pr.HeadSHA {
		if pr.CommentID == 0 {
			pr.CommentID = cur.CommentID
		}
		p.m[k] = pr
	}
}

// get returns the stored plan of a pull request with its comment id.
func (p *prPlans) get(provider string, n int) (PRPlan, bool) {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		pr, err := p.shared.GetPRPlan(ctx, provider, n)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				p.log.Warn("pr_plan_read_failed", "number", n, "error", err)
			}
			return PRPlan{}, false
		}
		return pr, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.m[p.key(provider, n)]
	return pr, ok
}

// setComment records the comment a pull request's preview was posted in.
func (p *prPlans) setComment(provider string, n int, id int64) {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := p.shared.SetPRPlanComment(ctx, provider, n, id); err != nil {
			p.log.Warn("pr_plan_store_failed", "number", n, "error", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.key(provider, n)
	if cur, ok := p.m[k]; ok {
		cur.CommentID = id
		p.m[k] = cur
	}
}

// posting serialises the posting of one pull request's previews in this
// server, so that two pushes in quick succession do not both create a
// comment; it returns the unlock.
func (p *prPlans) posting(provider string, n int) func() {
	p.mu.Lock()
	if p.posts == nil {
		p.posts = map[string]*sync.Mutex{}
	}
	k := p.key(provider, n)
	m, ok := p.posts[k]
	if !ok {
		m = &sync.Mutex{}
		p.posts[k] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (p *prPlans) remove(provider string, n int) {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := p.shared.DeletePRPlan(ctx, provider, n); err != nil {
			p.log.Warn("pr_plan_delete_failed", "number", n, "error", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, p.key(provider, n))
}

func (p *prPlans) list() []PRPlan {
	if p.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		out, err := p.shared.ListPRPlans(ctx)
		if err != nil {
			p.log.Warn("pr_plan_list_failed", "error", err)
		}
		if out == nil {
			out = []PRPlan{}
		}
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PRPlan, 0, len(p.m))
	for _, v := range p.m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out
}

// pullRequest records a pull request and plans its head in the background.
func (s *Server) pullRequest(c *echo.Context, pr PRPlan, action string) error {
	switch action {
	case "opened", "reopened", "synchronize", "edited", "ready_for_review":
	case "closed":
		s.prs.remove(pr.Provider, pr.Number)
		s.metrics.observeWebhook(pr.Provider, "pull_request", "closed")
		return c.JSON(http.StatusOK, hookAnswer{Message: "pull request closed"})
	default:
		s.metrics.observeWebhook(pr.Provider, "pull_request", "ignored")
		return c.JSON(http.StatusOK, hookAnswer{Message: "pull request action ignored"})
	}
	if b := s.trackedBranch(c.Request().Context()); b != "" && pr.BaseRef != b {
		s.metrics.observeWebhook(pr.Provider, "pull_request", "other_branch")
		return c.JSON(http.StatusOK, hookAnswer{Message: "pull request into " + pr.BaseRef + " ignored: tracking " + b})
	}
	if pr.HeadSHA == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "pull request has no head sha")
	}
	pr.State = "planning"
	pr.Updated = s.now()
	s.prs.put(pr)
	s.metrics.observeWebhook(pr.Provider, "pull_request", "plan_requested")
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.planPR(s.ctx, pr)
	}()
	return c.JSON(http.StatusAccepted, hookAnswer{Message: "plan requested"})
}

func (s *Server) planPR(ctx context.Context, pr PRPlan) {
	f := s.forges[pr.Provider]
	if pr.Repo == "" {
		f = nil
	}
	if f != nil {
		if err := f.setStatus(ctx, pr, statePending, "hoist is planning this revision", s.prTarget(pr)); err != nil {
			s.log.Warn("pr_status_failed", "provider", pr.Provider, "repo", pr.Repo, "sha", pr.HeadSHA, "error", err)
		}
	}
	start := time.Now()
	pr.Plan, pr.Error = planProject(ctx, s.defaultProj(), pr)
	pr.Projects = nil
	for _, p := range s.hookProjects(ctx, pr.Repo, "refs/heads/"+pr.BaseRef) {
		if p == s.defaultProj() {
			continue
		}
		pl, perr := planProject(ctx, p, pr)
		pr.Projects = append(pr.Projects, ProjectPRPlan{Project: p.name, Plan: pl, Error: perr})
	}
	pr.State = "planned"
	for _, r := range pr.results() {
		switch {
		case r.Error != "":
			pr.State = "error"
		case !r.Plan.Valid && pr.State != "error":
			pr.State = "invalid"
		}
	}
	planned := time.Since(start)
	pr.Updated = s.now()
	if f != nil {
		s.postPreview(ctx, f, &pr)
		s.log.Info("pr_preview_posted", "provider", pr.Provider, "repo", pr.Repo, "number", pr.Number, "sha", pr.HeadSHA,
			"state", pr.State, "posted", pr.Posted, "comment_id", pr.CommentID,
			"plan_ms", planned.Milliseconds(), "total_ms", time.Since(start).Milliseconds())
	}
	s.prs.update(pr)
}

// planProject plans pr's head in project p: the plan, or why planning
// failed.
func planProject(ctx context.Context, p *project, pr PRPlan) (*Plan, string) {
	if p.Planner == nil {
		return nil, "planning is not available"
	}
	plan, err := p.Planner.PlanRevision(ctx, pr.Ref, pr.HeadSHA)
	if err != nil {
		return nil, err.Error()
	}
	return &plan, ""
}

// results are pr's plans, the default project's first.
func (pr PRPlan) results() []ProjectPRPlan {
	out := []ProjectPRPlan{{Plan: pr.Plan, Error: pr.Error}}
	return append(out, pr.Projects...)
}

// prTarget is the dashboard link a preview's status and comment carry;
// empty without an external URL.
func (s *Server) prTarget(pr PRPlan) string {
	if s.cfg.ExternalURL == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.ExternalURL, "/") + "/history#pr-" + strconv.Itoa(pr.Number)
}

// postPreview posts pr's finished plan to its forge: the commit status,
// then hoist's one comment on the pull request, edited in place when it
// exists (its id is kept with the plan, so the next push, on any server,
// edits the same comment). A plan finished after a newer push leaves the
// comment to that push's plan. pr.Posted says how the status went.
func (s *Server) postPreview(ctx context.Context, f forge, pr *PRPlan) {
	state, desc := stateSuccess, planSummary(pr.Plan)
	switch pr.State {
	case "invalid":
		n := 0
		for _, r := range pr.results() {
			if r.Plan != nil {
				n += len(r.Plan.Errors)
			}
		}
		state, desc = stateFailure, fmt.Sprintf("invalid: %d error(s)", n)
	case "error":
		state, desc = stateError, "planning failed"
	}
	target := s.prTarget(*pr)
	pr.Posted = string(state)
	if err := f.setStatus(ctx, *pr, state, desc, target); err != nil {
		s.log.Warn("pr_status_failed", "provider", pr.Provider, "repo", pr.Repo, "sha", pr.HeadSHA, "error", err)
		pr.Posted = "error: " + err.Error()
	}
	unlock := s.prs.posting(pr.Provider, pr.Number)
	defer unlock()
	cur, ok := s.prs.get(pr.Provider, pr.Number)
	if !ok || cur.HeadSHA != pr.HeadSHA {
		return // closed, or a newer push: its plan posts the comment
	}
	var sections []projectPlan
	if len(pr.Projects) > 0 { // name the sections only when there are several
		sections = append(sections, projectPlan{Name: s.defaultProject, Plan: pr.Plan, Error: pr.Error})
		for _, r := range pr.Projects {
			sections = append(sections, projectPlan{Name: r.Project, Plan: r.Plan, Error: r.Error})
		}
	} else {
		sections = []projectPlan{{Plan: pr.Plan, Error: pr.Error}}
	}
	body := renderPreview(previewHead{Provider: pr.Provider, RepoURL: pr.RepoURL, SHA: pr.HeadSHA, DashboardURL: target}, sections)
	id, err := f.upsertComment(ctx, *pr, cur.CommentID, body)
	if err != nil {
		s.log.Warn("pr_comment_failed", "provider", pr.Provider, "repo", pr.Repo, "number", pr.Number, "error", err)
		return
	}
	pr.CommentID = id
	if id != cur.CommentID {
		s.prs.setComment(pr.Provider, pr.Number, id)
	}
}

// planSummary is a one-line description of a plan, at most 140 characters:
// the changes, then the number of warnings and the first one (fields
// without effect in hoist), which the dashboard lists in full.
func planSummary(p *Plan) string {
	if p == nil {
		return ""
	}
	counts := map[string]int{}
	for _, ch := range p.Changes {
		if ch.Action != "none" {
			counts[ch.Action]++
		}
	}
	var parts []string
	for _, a := range []string{"create", "update", "replace", "delete"} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", counts[a], a))
		}
	}
	out := strings.Join(parts, ", ")
	if len(parts) == 0 {
		out = "no changes"
	}
	if n := len(p.Warnings); n > 0 {
		out += fmt.Sprintf("; %d warning(s): %s", n, p.Warnings[0])
	}
	if len(out) > 140 {
		out = strings.ToValidUTF8(out[:140], "")
	}
	return out
}

// pulls are the pull-request plans of the request's project: webhooks
// (and so pull requests) come to the default project, and to the other
// projects reading the same repository (hookProjects), whose plan then
// takes Plan's place.
func (s *Server) pulls(c *echo.Context) []PRPlan {
	all := s.prs.list()
	name := s.proj(c).name
	if name == s.defaultProject {
		return all
	}
	out := []PRPlan{}
	for _, pr := range all {
		for _, r := range pr.Projects {
			if r.Project == name {
				pr.Plan, pr.Error, pr.Projects = r.Plan, r.Error, nil
				out = append(out, pr)
				break
			}
		}
	}
	return out
}
