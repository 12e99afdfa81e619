package forge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Status is a commit status as posted to a fake forge.
type Status struct {
	// Repo is owner/name (GitHub) or the project path (GitLab).
	Repo, SHA string
	// State is as posted: GitHub's pending, success, failure, error;
	// GitLab's pending, running, success, failed, canceled.
	State, Context, Description, TargetURL string
}

// Comment is a pull request comment or merge request note.
type Comment struct {
	ID     int64
	Repo   string
	Number int
	Body   string
	// Edits counts the times it was edited after creation.
	Edits int
}

// GitHub is a fake of GitHub's REST API (https://docs.github.com/rest):
// POST /repos/{owner}/{repo}/statuses/{sha} (commit statuses), and issue
// comments — the conversation of a pull request: GET and POST
// /repos/{owner}/{repo}/issues/{number}/comments, PATCH
// /repos/{owner}/{repo}/issues/comments/{id}. Every request must carry
// "Authorization: Bearer <token>" (401 "Bad credentials" otherwise).
type GitHub struct {
	// URL is the API base URL (http://127.0.0.1:port/).
	URL string

	token string
	now   func() time.Time

	mu       sync.Mutex
	statuses []Status
	comments []*Comment
	nextID   int64
	lists    int
}

// NewGitHub starts a fake GitHub answering requests authenticated with
// token; it stops when the test ends.
func NewGitHub(t testing.TB, token string) *GitHub {
	g := &GitHub{token: token, now: time.Now, nextID: 1000}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/"
	return g
}

var (
	ghStatusRE   = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/statuses/([^/]+)$`)
	ghCommentsRE = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$`)
	ghCommentRE  = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$`)
)

// ghError writes GitHub's error body: {"message", "documentation_url",
// "status"}.
func ghError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(code)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP answers the API.
func (g *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && ghStatusRE.MatchString(p):
		m := ghStatusRE.FindStringSubmatch(p)
		var in struct {
			State       string `json:"state"`
			TargetURL   string `json:"target_url"`
			Description string `json:"description"`
			Context     string `json:"context"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			ghError(w, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
		switch in.State {
		case "error", "failure", "pending", "success":
		default:
			ghError(w, http.StatusUnprocessableEntity, "Validation Failed")
			return
		}
		if in.Context == "" {
			in.Context = "default"
		}
		g.mu.Lock()
		g.statuses = append(g.statuses, Status{Repo: m[1], SHA: m[2], State: in.State, Context: in.Context, Description: in.Description, TargetURL: in.TargetURL})
		g.nextID++
		id := g.nextID
		g.mu.Unlock()
		now := g.now().UTC().Format(time.RFC3339)
		writeJSON(w, http.StatusCreated, map[string]any{
			"url": g.URL + "repos/" + m[1] + "/statuses/" + m[2], "id": id, "node_id": fmt.Sprintf("SC_%d", id),
			"state": in.State, "description": in.Description, "target_url": in.TargetURL, "context": in.Context,
			"avatar_url": "", "created_at": now, "updated_at": now, "creator": ghUser(),
		})
	case r.Method == http.MethodGet && ghCommentsRE.MatchString(p):
		m := ghCommentsRE.FindStringSubmatch(p)
		n, _ := strconv.Atoi(m[2])
		var all []map[string]any
		g.mu.Lock()
		g.lists++
		for _, c := range g.comments {
			if c.Repo == m[1] && c.Number == n {
				all = append(all, g.commentJSON(c))
			}
		}
		g.mu.Unlock()
		writeJSON(w, http.StatusOK, page(w, r, all, func(page int) string {
			return fmt.Sprintf("%srepos/%s/issues/%d/comments?page=%d", g.URL, m[1], n, page)
		}))
	case r.Method == http.MethodPost && ghCommentsRE.MatchString(p):
		m := ghCommentsRE.FindStringSubmatch(p)
		n, _ := strconv.Atoi(m[2])
		var in struct {
			Body *string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
			ghError(w, http.StatusUnprocessableEntity, "Validation Failed")
			return
		}
		if len(*in.Body) > 65536 {
			ghError(w, http.StatusUnprocessableEntity, "Validation Failed: body is too long (maximum is 65536 characters)")
			return
		}
		g.mu.Lock()
		g.nextID++
		c := &Comment{ID: g.nextID, Repo: m[1], Number: n, Body: *in.Body}
		g.comments = append(g.comments, c)
		out := g.commentJSON(c)
		g.mu.Unlock()
		writeJSON(w, http.StatusCreated, out)
	case r.Method == http.MethodPatch && ghCommentRE.MatchString(p):
		m := ghCommentRE.FindStringSubmatch(p)
		id, _ := strconv.ParseInt(m[2], 10, 64)
		var in struct {
			Body *string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
			ghError(w, http.StatusUnprocessableEntity, "Validation Failed")
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, c := range g.comments {
			if c.ID == id && c.Repo == m[1] {
				c.Body = *in.Body
				c.Edits++
				writeJSON(w, http.StatusOK, g.commentJSON(c))
				return
			}
		}
		ghError(w, http.StatusNotFound, "Not Found")
	default:
		ghError(w, http.StatusNotFound, "Not Found")
	}
}

func ghUser() map[string]any {
	return map[string]any{"login": "hoist-bot", "id": 1, "node_id": "U_1", "type": "Bot", "site_admin": false}
}

// commentJSON is an issue comment as the API returns it; callers hold mu.
func (g *GitHub) commentJSON(c *Comment) map[string]any {
	now := g.now().UTC().Format(time.RFC3339)
	return map[string]any{
		"id": c.ID, "node_id": fmt.Sprintf("IC_%d", c.ID), "body": c.Body, "user": ghUser(),
		"url":        fmt.Sprintf("%srepos/%s/issues/comments/%d", g.URL, c.Repo, c.ID),
		"html_url":   fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", c.Repo, c.Number, c.ID),
		"issue_url":  fmt.Sprintf("%srepos/%s/issues/%d", g.URL, c.Repo, c.Number),
		"created_at": now, "updated_at": now, "author_association": "NONE",
	}
}

// page answers one page (?page, ?per_page, default 30) of all and sets
// GitHub's Link header to the next and last pages.
func page(w http.ResponseWriter, r *http.Request, all []map[string]any, link func(int) string) []map[string]any {
	pg := pageOf(r, 30, len(all))
	if pg.n < pg.last {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, link(pg.n+1), link(pg.last)))
	}
	return pg.slice(all)
}

// pageReq is the page a list request asks for: number n of size per, of
// last pages in all.
type pageReq struct{ n, per, last int }

// pageOf reads ?page and ?per_page (def when absent or over 100, as both
// forges cap it) for a list of total items.
func pageOf(r *http.Request, def, total int) pageReq {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 || per > 100 {
		per = def
	}
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if n <= 0 {
		n = 1
	}
	return pageReq{n: n, per: per, last: max((total+per-1)/per, 1)}
}

// slice is the page's items of all (never nil: an empty page is []).
func (p pageReq) slice(all []map[string]any) []map[string]any {
	lo, hi := min((p.n-1)*p.per, len(all)), min(p.n*p.per, len(all))
	out := all[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	return out
}

// Statuses returns the commit statuses posted so far, oldest first.
func (g *GitHub) Statuses() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Status(nil), g.statuses...)
}

// Comments returns the comments on pull request n of repo.
func (g *GitHub) Comments(repo string, n int) []Comment {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Comment
	for _, c := range g.comments {
		if c.Repo == repo && c.Number == n {
			out = append(out, *c)
		}
	}
	return out
}

// AddComment posts a comment as someone else would, and returns its id.
func (g *GitHub) AddComment(repo string, n int, body string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	g.comments = append(g.comments, &Comment{ID: g.nextID, Repo: repo, Number: n, Body: body})
	return g.nextID
}

// DeleteComment deletes a comment, as a user might.
func (g *GitHub) DeleteComment(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, c := range g.comments {
		if c.ID == id {
			g.comments = append(g.comments[:i], g.comments[i+1:]...)
			return
		}
	}
}

// Lists counts the requests that listed a pull request's comments (what a
// client does when it does not know its comment's id).
func (g *GitHub) Lists() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lists
}
