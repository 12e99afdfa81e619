package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Provider string    `json:"provider"`
	Number   int       `json:"number"`
	Title    string    `json:"title"`
	URL      string    `json:"url,omitempty"`
	Repo     string    `json:"repo"`
	HeadSHA  string    `json:"head_sha"`
	HeadRef  string    `json:"head_ref"`
	BaseRef  string    `json:"base_ref"`
	Ref      string    `json:"ref"`
	State    string    `json:"state"` // planning | planned | invalid | error
	Error    string    `json:"error,omitempty"`
	Plan     *Plan     `json:"plan,omitempty"`
	Posted   string    `json:"posted,omitempty"` // commit status result, when posted
	Updated  time.Time `json:"updated_at"`
}

// prPlans keeps the latest plan per pull request for the dashboard, in
// shared (the database, seen by every server) or, without it, in memory.
type prPlans struct {
	mu sync.Mutex
	m  map[string]PRPlan

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
	p.m[p.key(pr.Provider, pr.Number)] = pr
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
		p.m[k] = pr
	}
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
	post := pr.Provider == "github" && s.cfg.GitHubToken != "" && pr.Repo != ""
	if post {
		s.postStatus(ctx, pr, "pending", "hoist is planning this revision")
	}
	if s.defaultProj().Planner == nil {
		pr.State, pr.Error = "error", "planning is not available"
	} else if plan, err := s.defaultProj().Planner.PlanRevision(ctx, pr.Ref, pr.HeadSHA); err != nil {
		pr.State, pr.Error = "error", err.Error()
	} else {
		pr.Plan = &plan
		pr.State = "planned"
		if !plan.Valid {
			pr.State = "invalid"
		}
	}
	pr.Updated = s.now()
	if post {
		state, desc := "success", planSummary(pr.Plan)
		switch pr.State {
		case "invalid":
			state, desc = "failure", fmt.Sprintf("invalid: %d error(s)", len(pr.Plan.Errors))
		case "error":
			state, desc = "error", "planning failed"
		}
		pr.Posted = s.postStatus(ctx, pr, state, desc)
	}
	s.prs.update(pr)
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

// postStatus posts a commit status for pr's head and returns a short
// result for the dashboard.
func (s *Server) postStatus(ctx context.Context, pr PRPlan, state, desc string) string {
	payload := map[string]string{"state": state, "description": desc, "context": "hoist/plan"}
	if s.cfg.ExternalURL != "" {
		payload["target_url"] = strings.TrimRight(s.cfg.ExternalURL, "/") + "/history#pr-" + fmt.Sprint(pr.Number)
	}
	b, _ := json.Marshal(payload)
	url := strings.TrimRight(s.cfg.GitHubAPI, "/") + "/repos/" + pr.Repo + "/statuses/" + pr.HeadSHA
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.GitHubToken)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		s.log.Warn("github_status_failed", "repo", pr.Repo, "sha", pr.HeadSHA, "error", err)
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		s.log.Warn("github_status_refused", "repo", pr.Repo, "sha", pr.HeadSHA, "status", resp.StatusCode)
		return fmt.Sprintf("refused: HTTP %d", resp.StatusCode)
	}
	return state
}

// pulls are the pull-request plans of the request's project: webhooks
// (and so pull requests) belong to the default project; the others have
// none.
func (s *Server) pulls(c *echo.Context) []PRPlan {
	if s.proj(c).name != s.defaultProject {
		return []PRPlan{}
	}
	return s.prs.list()
}
