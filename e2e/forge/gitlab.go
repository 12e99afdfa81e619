package forge

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// GitLab is a fake of GitLab's REST API v4 (https://docs.gitlab.com/api/):
// POST /projects/:id/statuses/:sha (commit statuses) and merge request
// notes — GET and POST /projects/:id/merge_requests/:iid/notes, PUT
// /projects/:id/merge_requests/:iid/notes/:note_id. :id is the project's
// URL-encoded path (acme%2Fspecs). Every request must carry the
// PRIVATE-TOKEN header (401 otherwise).
type GitLab struct {
	// URL is the API base URL, ending in /api/v4/.
	URL string

	token string
	now   func() time.Time

	mu       sync.Mutex
	statuses []Status
	notes    []*Comment
	nextID   int64
}

// NewGitLab starts a fake GitLab answering requests authenticated with
// token; it stops when the test ends.
func NewGitLab(t testing.TB, token string) *GitLab {
	g := &GitLab{token: token, now: time.Now, nextID: 5000}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/api/v4/"
	return g
}

var (
	glStatusRE = regexp.MustCompile(`^/api/v4/projects/([^/]+)/statuses/([^/]+)$`)
	glNotesRE  = regexp.MustCompile(`^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes$`)
	glNoteRE   = regexp.MustCompile(`^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes/(\d+)$`)
)

// glError writes GitLab's error body: {"message": "..."}.
func glError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg})
}

// params reads a request's parameters, sent as JSON or as a form.
func params(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
		var raw map[string]any
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			return nil, err
		}
		for k, v := range raw {
			out[k] = fmt.Sprint(v)
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k := range r.Form {
		out[k] = r.Form.Get(k)
	}
	return out, nil
}

// ServeHTTP answers the API.
func (g *GitLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("PRIVATE-TOKEN") != g.token {
		glError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	// The project id is one path segment: its slashes arrive encoded.
	p := r.URL.EscapedPath()
	project := func(seg string) string { s, _ := url.PathUnescape(seg); return s }
	switch {
	case r.Method == http.MethodPost && glStatusRE.MatchString(p):
		m := glStatusRE.FindStringSubmatch(p)
		in, err := params(r)
		if err != nil {
			glError(w, http.StatusBadRequest, "400 Bad request")
			return
		}
		switch in["state"] {
		case "pending", "running", "success", "failed", "canceled", "skipped":
		default:
			glError(w, http.StatusBadRequest, "state does not have a valid value")
			return
		}
		name := in["name"]
		if name == "" {
			name = in["context"]
		}
		if name == "" {
			name = "default"
		}
		g.mu.Lock()
		g.statuses = append(g.statuses, Status{Repo: project(m[1]), SHA: m[2], State: in["state"], Context: name, Description: in["description"], TargetURL: in["target_url"]})
		g.nextID++
		id := g.nextID
		g.mu.Unlock()
		now := g.now().UTC().Format(time.RFC3339)
		writeJSON(w, http.StatusCreated, map[string]any{
			"id": id, "sha": m[2], "ref": in["ref"], "status": in["state"], "name": name, "target_url": in["target_url"],
			"description": in["description"], "created_at": now, "started_at": nil, "finished_at": nil,
			"allow_failure": false, "coverage": nil, "author": glUser(),
		})
	case r.Method == http.MethodGet && glNotesRE.MatchString(p):
		m := glNotesRE.FindStringSubmatch(p)
		iid, _ := strconv.Atoi(m[2])
		var all []map[string]any
		g.mu.Lock()
		for _, c := range g.notes {
			if c.Repo == project(m[1]) && c.Number == iid {
				all = append(all, g.noteJSON(c))
			}
		}
		g.mu.Unlock()
		writeJSON(w, http.StatusOK, glPage(w, r, all))
	case r.Method == http.MethodPost && glNotesRE.MatchString(p):
		m := glNotesRE.FindStringSubmatch(p)
		iid, _ := strconv.Atoi(m[2])
		in, err := params(r)
		if err != nil || in["body"] == "" {
			glError(w, http.StatusBadRequest, "400 Bad request - body is missing")
			return
		}
		g.mu.Lock()
		g.nextID++
		c := &Comment{ID: g.nextID, Repo: project(m[1]), Number: iid, Body: in["body"]}
		g.notes = append(g.notes, c)
		out := g.noteJSON(c)
		g.mu.Unlock()
		writeJSON(w, http.StatusCreated, out)
	case r.Method == http.MethodPut && glNoteRE.MatchString(p):
		m := glNoteRE.FindStringSubmatch(p)
		iid, _ := strconv.Atoi(m[2])
		id, _ := strconv.ParseInt(m[3], 10, 64)
		in, err := params(r)
		if err != nil || in["body"] == "" {
			glError(w, http.StatusBadRequest, "400 Bad request - body is missing")
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, c := range g.notes {
			if c.ID == id && c.Repo == project(m[1]) && c.Number == iid {
				c.Body = in["body"]
				c.Edits++
				writeJSON(w, http.StatusOK, g.noteJSON(c))
				return
			}
		}
		glError(w, http.StatusNotFound, "404 Not found")
	default:
		glError(w, http.StatusNotFound, "404 Not Found")
	}
}

func glUser() map[string]any {
	return map[string]any{"id": 1, "username": "hoist-bot", "name": "hoist", "state": "active", "avatar_url": "", "web_url": "https://gitlab.example/hoist-bot"}
}

// noteJSON is a merge request note as the API returns it; callers hold mu.
func (g *GitLab) noteJSON(c *Comment) map[string]any {
	now := g.now().UTC().Format(time.RFC3339)
	return map[string]any{
		"id": c.ID, "type": nil, "body": c.Body, "attachment": nil, "author": glUser(),
		"created_at": now, "updated_at": now, "system": false, "noteable_id": c.Number * 10,
		"noteable_type": "MergeRequest", "noteable_iid": c.Number, "resolvable": false, "confidential": false, "internal": false,
	}
}

// glPage answers one page (?page, ?per_page, default 20) of all with
// GitLab's pagination headers (X-Page, X-Per-Page, X-Next-Page, X-Total,
// X-Total-Pages).
func glPage(w http.ResponseWriter, r *http.Request, all []map[string]any) []map[string]any {
	pg := pageOf(r, 20, len(all))
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(pg.n))
	h.Set("X-Per-Page", strconv.Itoa(pg.per))
	h.Set("X-Total", strconv.Itoa(len(all)))
	h.Set("X-Total-Pages", strconv.Itoa(pg.last))
	h.Set("X-Next-Page", "")
	if pg.n < pg.last {
		h.Set("X-Next-Page", strconv.Itoa(pg.n+1))
	}
	return pg.slice(all)
}

// Statuses returns the commit statuses posted so far, oldest first.
func (g *GitLab) Statuses() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Status(nil), g.statuses...)
}

// Notes returns the notes on merge request iid of project.
func (g *GitLab) Notes(project string, iid int) []Comment {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Comment
	for _, c := range g.notes {
		if c.Repo == project && c.Number == iid {
			out = append(out, *c)
		}
	}
	return out
}
