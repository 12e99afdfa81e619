package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
)

const (
	// maxHookBody caps webhook payloads.
	maxHookBody = 1 << 20
	// deliveryTTL is how long delivery ids are remembered.
	deliveryTTL = 24 * time.Hour
	// deliveryMax bounds the memory of remembered deliveries.
	deliveryMax = 20000
	// maxPRPlans bounds the pull request plans kept for the dashboard.
	maxPRPlans = 100
)

// hookAnswer is the JSON body of every webhook answer.
type hookAnswer struct {
	Message   string `json:"message"`
	Requested uint64 `json:"requested,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// readHookBody reads at most maxHookBody bytes; larger bodies are 413.
func readHookBody(c *echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > maxHookBody {
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, "payload larger than 1 MiB")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxHookBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, "payload larger than 1 MiB")
		}
		return nil, echo.NewHTTPError(http.StatusBadRequest, "cannot read payload")
	}
	return body, nil
}

// validSignature reports whether header is "sha256=<hex>" of the HMAC-SHA256
// of body under secret, compared in constant time. There is deliberately no
// SHA-1 fallback.
func validSignature(secret string, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// deliveries remembers delivery ids (and payload digests) so a replayed
// delivery is acknowledged but not processed twice: in shared (the
// database, so a replay reaching another server is caught too) or, without
// it, in memory.
type deliveries struct {
	mu  sync.Mutex
	m   map[string]time.Time
	now func() time.Time
	ttl time.Duration
	max int

	shared Shared
	log    *slog.Logger
}

func newDeliveries(now func() time.Time, ttl time.Duration, max int) *deliveries {
	return &deliveries{m: map[string]time.Time{}, now: now, ttl: ttl, max: max}
}

// seen records every key and reports whether any of them was already
// known (and not expired). Empty keys are skipped.
func (d *deliveries) seen(keys ...string) bool {
	if d.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		dup, err := d.shared.SeenDelivery(ctx, d.ttl, keys...)
		if err != nil {
			// Processing a delivery twice only requests a second sync;
			// dropping it could miss a push.
			d.log.Warn("delivery_record_failed", "error", err)
			return false
		}
		return dup
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	dup := false
	for _, k := range keys {
		if k == "" {
			continue
		}
		if t, ok := d.m[k]; ok && now.Sub(t) < d.ttl {
			dup = true
		}
	}
	if dup {
		return true
	}
	if len(d.m)+len(keys) > d.max {
		for k, t := range d.m {
			if now.Sub(t) >= d.ttl {
				delete(d.m, k)
			}
		}
		for k := range d.m { // still full: drop arbitrary old entries
			if len(d.m)+len(keys) <= d.max {
				break
			}
			delete(d.m, k)
		}
	}
	for _, k := range keys {
		if k != "" {
			d.m[k] = now
		}
	}
	return false
}

func digest(provider string, body []byte) string {
	sum := sha256.Sum256(body)
	return provider + ":body:" + hex.EncodeToString(sum[:])
}

// hookPrologue reads and authenticates a webhook. It returns the body, or
// nil and an error already mapped to the right status.
func (s *Server) hookPrologue(c *echo.Context, provider string, verify func(body []byte) bool) ([]byte, error) {
	if s.cfg.WebhookSecret == "" {
		s.metrics.observeWebhook(provider, "", "disabled")
		return nil, echo.NewHTTPError(http.StatusNotFound, "webhooks are disabled: no secret configured")
	}
	body, err := readHookBody(c)
	if err != nil {
		s.metrics.observeWebhook(provider, "", "too_large_or_unreadable")
		return nil, err
	}
	if !verify(body) {
		s.log.Warn("webhook_refused", "provider", provider, "remote", c.RealIP(), "reason", "bad_signature")
		s.metrics.observeWebhook(provider, "", "unauthorized")
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "missing or invalid signature")
	}
	return body, nil
}

func (s *Server) hookGitHub(c *echo.Context) error {
	r := c.Request()
	body, err := s.hookPrologue(c, "github", func(b []byte) bool {
		return validSignature(s.cfg.WebhookSecret, b, r.Header.Get("X-Hub-Signature-256"))
	})
	if err != nil {
		return err
	}
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	if s.seen.seen(keyed("github:id:", id), digest("github", body)) {
		s.metrics.observeWebhook("github", event, "duplicate")
		return c.JSON(http.StatusOK, hookAnswer{Message: "duplicate delivery ignored", Duplicate: true})
	}
	switch event {
	case "ping":
		s.metrics.observeWebhook("github", event, "ok")
		return c.JSON(http.StatusOK, hookAnswer{Message: "pong"})
	case "push":
		var p struct {
			Ref        string `json:"ref"`
			After      string `json:"after"`
			Repository struct {
				FullName string `json:"full_name"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			s.metrics.observeWebhook("github", event, "bad_payload")
			return echo.NewHTTPError(http.StatusBadRequest, "push payload is not valid JSON")
		}
		return s.pushed(c, "github", p.Ref, p.After, p.Repository.FullName)
	case "pull_request":
		var p struct {
			Action      string `json:"action"`
			Number      int    `json:"number"`
			PullRequest struct {
				Title   string `json:"title"`
				HTMLURL string `json:"html_url"`
				Head    struct {
					SHA string `json:"sha"`
					Ref string `json:"ref"`
				} `json:"head"`
				Base struct {
					Ref string `json:"ref"`
				} `json:"base"`
			} `json:"pull_request"`
			Repository struct {
				FullName string `json:"full_name"`
				HTMLURL  string `json:"html_url"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Number == 0 {
			s.metrics.observeWebhook("github", event, "bad_payload")
			return echo.NewHTTPError(http.StatusBadRequest, "pull_request payload is not valid")
		}
		pr := PRPlan{
			Provider: "github", Number: p.Number, Title: p.PullRequest.Title, URL: p.PullRequest.HTMLURL,
			Repo: p.Repository.FullName, RepoURL: p.Repository.HTMLURL, HeadSHA: p.PullRequest.Head.SHA, HeadRef: p.PullRequest.Head.Ref,
			BaseRef: p.PullRequest.Base.Ref, Ref: fmt.Sprintf("refs/pull/%d/head", p.Number),
		}
		return s.pullRequest(c, pr, p.Action)
	default:
		s.metrics.observeWebhook("github", event, "ignored")
		return c.JSON(http.StatusOK, hookAnswer{Message: "event ignored"})
	}
}

func keyed(prefix, id string) string {
	if id == "" {
		return ""
	}
	return prefix + id
}

func (s *Server) hookGitLab(c *echo.Context) error {
	r := c.Request()
	body, err := s.hookPrologue(c, "gitlab", func([]byte) bool {
		got := r.Header.Get("X-Gitlab-Token")
		return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.WebhookSecret)) == 1
	})
	if err != nil {
		return err
	}
	event := r.Header.Get("X-Gitlab-Event")
	id := r.Header.Get("X-Gitlab-Event-UUID")
	if id == "" {
		id = r.Header.Get("Idempotency-Key")
	}
	if s.seen.seen(keyed("gitlab:id:", id), digest("gitlab", body)) {
		s.metrics.observeWebhook("gitlab", event, "duplicate")
		return c.JSON(http.StatusOK, hookAnswer{Message: "duplicate delivery ignored", Duplicate: true})
	}
	switch event {
	case "Push Hook":
		var p struct {
			Ref     string `json:"ref"`
			After   string `json:"after"`
			Project struct {
				PathWithNamespace string `json:"path_with_namespace"`
			} `json:"project"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			s.metrics.observeWebhook("gitlab", event, "bad_payload")
			return echo.NewHTTPError(http.StatusBadRequest, "push payload is not valid JSON")
		}
		return s.pushed(c, "gitlab", p.Ref, p.After, p.Project.PathWithNamespace)
	case "Merge Request Hook":
		var p struct {
			Project struct {
				PathWithNamespace string `json:"path_with_namespace"`
				WebURL            string `json:"web_url"`
			} `json:"project"`
			Attrs struct {
				IID          int    `json:"iid"`
				Title        string `json:"title"`
				URL          string `json:"url"`
				Action       string `json:"action"`
				SourceBranch string `json:"source_branch"`
				TargetBranch string `json:"target_branch"`
				LastCommit   struct {
					ID string `json:"id"`
				} `json:"last_commit"`
			} `json:"object_attributes"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Attrs.IID == 0 {
			s.metrics.observeWebhook("gitlab", event, "bad_payload")
			return echo.NewHTTPError(http.StatusBadRequest, "merge request payload is not valid")
		}
		action := map[string]string{"open": "opened", "reopen": "reopened", "update": "synchronize", "close": "closed", "merge": "closed"}[p.Attrs.Action]
		pr := PRPlan{
			Provider: "gitlab", Number: p.Attrs.IID, Title: p.Attrs.Title, URL: p.Attrs.URL,
			Repo: p.Project.PathWithNamespace, RepoURL: p.Project.WebURL, HeadSHA: p.Attrs.LastCommit.ID, HeadRef: p.Attrs.SourceBranch,
			BaseRef: p.Attrs.TargetBranch, Ref: fmt.Sprintf("refs/merge-requests/%d/head", p.Attrs.IID),
		}
		return s.pullRequest(c, pr, action)
	default:
		s.metrics.observeWebhook("gitlab", event, "ignored")
		return c.JSON(http.StatusOK, hookAnswer{Message: "event ignored"})
	}
}

// hookGeneric accepts any payload signed like GitHub's (HMAC-SHA256 in
// X-Hub-Signature-256) and requests a sync. X-Hoist-Delivery (or
// Idempotency-Key) names the delivery for replay protection.
func (s *Server) hookGeneric(c *echo.Context) error {
	r := c.Request()
	_, err := s.hookPrologue(c, "generic", func(b []byte) bool {
		return validSignature(s.cfg.WebhookSecret, b, r.Header.Get("X-Hub-Signature-256"))
	})
	if err != nil {
		return err
	}
	id := r.Header.Get("X-Hoist-Delivery")
	if id == "" {
		id = r.Header.Get("Idempotency-Key")
	}
	if s.seen.seen(keyed("generic:id:", id)) {
		s.metrics.observeWebhook("generic", "", "duplicate")
		return c.JSON(http.StatusOK, hookAnswer{Message: "duplicate delivery ignored", Duplicate: true})
	}
	// A generic trigger names no repository: every project syncs (one
	// whose source did not change finds nothing to do).
	n := s.requestSync(s.defaultProj())
	for _, p := range s.projects {
		if p != s.defaultProj() {
			s.requestSync(p)
		}
	}
	s.metrics.observeWebhook("generic", "", "sync_requested")
	return c.JSON(http.StatusAccepted, hookAnswer{Message: "sync requested", Requested: n})
}

// trackedBranch is the branch pushes must target to trigger a sync; empty
// accepts every branch.
func (s *Server) trackedBranch(ctx context.Context) string {
	if s.cfg.Branch != "" {
		return s.cfg.Branch
	}
	if st, err := s.defaultProj().Syncer.SyncStatus(ctx); err == nil {
		return st.Branch
	}
	return ""
}

// hookProjects are the projects a webhook about repository repo (the
// forge's "owner/name") and ref concerns: the default project (which the
// receivers have always served), and every other project tracking the
// branch of ref in the default project's repository (another directory of
// a monorepo) or in a repository whose URL ends in repo.
func (s *Server) hookProjects(ctx context.Context, repo, ref string) []*project {
	out := []*project{s.defaultProj()}
	def, err := s.defaultProj().Syncer.SyncStatus(ctx)
	if err != nil {
		return out
	}
	names := make([]string, 0, len(s.projects))
	for name := range s.projects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.projects[name]
		if p == s.defaultProj() {
			continue
		}
		st, err := p.Syncer.SyncStatus(ctx)
		if err != nil || (st.Branch != "" && "refs/heads/"+st.Branch != ref) {
			continue
		}
		if (st.Repo != "" && st.Repo == def.Repo) || repoNamed(st.Repo, repo) {
			out = append(out, p)
		}
	}
	return out
}

// repoNamed reports whether the repository URL u is the forge's repository
// "owner/name" (https://host/owner/name(.git), git@host:owner/name.git).
func repoNamed(u, name string) bool {
	if name == "" || u == "" {
		return false
	}
	u = strings.TrimSuffix(strings.TrimRight(u, "/"), ".git")
	return strings.HasSuffix(u, "/"+name) || strings.HasSuffix(u, ":"+name)
}

// pushed requests a sync when ref is the tracked branch. The answer goes
// out at once; the reconciler syncs in its own time.
func (s *Server) pushed(c *echo.Context, provider, ref, after, repo string) error {
	if b := s.trackedBranch(c.Request().Context()); b != "" && ref != "refs/heads/"+b {
		s.metrics.observeWebhook(provider, "push", "other_branch")
		return c.JSON(http.StatusOK, hookAnswer{Message: "push to " + ref + " ignored: tracking " + b})
	}
	n := s.requestSync(s.defaultProj())
	for _, p := range s.hookProjects(c.Request().Context(), repo, ref) {
		if p != s.defaultProj() {
			s.requestSync(p)
		}
	}
	s.log.Info("webhook_push", "provider", provider, "ref", ref, "after", after, "requested", n)
	s.metrics.observeWebhook(provider, "push", "sync_requested")
	return c.JSON(http.StatusAccepted, hookAnswer{Message: "sync requested", Requested: n})
}
