package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/labstack/echo/v5"
)

const (
	sessionCookie = "hoist_session"
	ctxPrincipal  = "hoist.principal"
	ctxSession    = "hoist.session"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
)

// session is a logged-in browser.
type session struct {
	id        string
	principal Principal
	csrf      string
	expires   time.Time
}

// sessions keeps login sessions in shared (the database, so every server
// and a restart know them) or, without it, in memory (a restart then logs
// everyone out).
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
	ttl time.Duration

	shared Shared
	log    *slog.Logger
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, now: now, ttl: ttl}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(p Principal) *session {
	if ss.shared != nil {
		s := &session{id: randomToken(), principal: p, csrf: randomToken(), expires: ss.now().Add(ss.ttl)}
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := ss.shared.CreateSession(ctx, s.id, p, s.csrf, s.expires); err != nil {
			// The cookie then authenticates nobody: the user logs in again.
			ss.log.Warn("session_store_failed", "error", err)
		}
		return s
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for id, s := range ss.m { // sweep expired ones; sessions are few
		if now.After(s.expires) {
			delete(ss.m, id)
		}
	}
	s := &session{id: randomToken(), principal: p, csrf: randomToken(), expires: now.Add(ss.ttl)}
	ss.m[s.id] = s
	return s
}

func (ss *sessions) get(id string) (*session, bool) {
	if ss.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		p, csrf, expires, err := ss.shared.GetSession(ctx, id)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				ss.log.Warn("session_lookup_failed", "error", err)
			}
			return nil, false
		}
		return &session{id: id, principal: p, csrf: csrf, expires: expires}, true
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return nil, false
	}
	if ss.now().After(s.expires) {
		delete(ss.m, id)
		return nil, false
	}
	return s, true
}

func (ss *sessions) delete(id string) {
	if ss.shared != nil {
		ctx, cancel := sharedCtx()
		defer cancel()
		if err := ss.shared.DeleteSession(ctx, id); err != nil {
			ss.log.Warn("session_delete_failed", "error", err)
		}
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// lookup resolves a bearer token to a principal.
func (s *Server) lookup(c *echo.Context, token string) (Principal, bool) {
	if token == "" {
		return Principal{}, false
	}
	if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AdminToken)) == 1 {
		return Principal{Name: "admin", Role: RoleAdmin}, true
	}
	if s.deps.Tokens == nil {
		return Principal{}, false
	}
	p, err := s.deps.Tokens.LookupToken(c.Request().Context(), token)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.log.Warn("token_lookup_failed", "error", err)
		}
		return Principal{}, false
	}
	switch p.Role {
	case RoleAdmin, RoleUser, RoleViewer:
		return p, true
	}
	return Principal{}, false
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate accepts a bearer token or a session cookie. Browsers asking
// for a page without either are sent to the login form; everyone else gets
// 401.
func (s *Server) authenticate(pages bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			r := c.Request()
			if tok := bearer(r); tok != "" {
				// Failed tokens count against the login limit of the
				// client's address: guessing through the API is no faster.
				ip := c.RealIP()
				if !s.logins.allow(ip) {
					c.Response().Header().Set("Retry-After", "60")
					return echo.NewHTTPError(http.StatusTooManyRequests, "too many failed attempts; wait a minute")
				}
				p, ok := s.lookup(c, tok)
				if !ok {
					s.logins.fail(ip)
					s.log.Warn("token_auth_failed", "remote", ip)
					c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hoist"`)
					return echo.NewHTTPError(http.StatusUnauthorized, "invalid token")
				}
				c.Set(ctxPrincipal, p)
				return next(c)
			}
			if ck, err := r.Cookie(sessionCookie); err == nil {
				if ses, ok := s.sess.get(ck.Value); ok {
					// A deleted or disabled user's session ends here.
					if p, ok := s.current(c, ses.principal); ok {
						c.Set(ctxPrincipal, p)
						c.Set(ctxSession, ses)
						return next(c)
					}
					s.sess.delete(ses.id)
				}
			}
			if pages && r.Method == http.MethodGet && wantsHTML(r) {
				return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(r.URL.RequestURI()))
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hoist"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "authentication required")
		}
	}
}

// csrf requires the session's token on every state-changing request that
// authenticated with the cookie. Bearer-token callers cannot be driven by a
// foreign page, and cross-origin browser requests are already refused by
// http.CrossOriginProtection; the token is the second line.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		ses, ok := c.Get(ctxSession).(*session)
		if !ok {
			return next(c)
		}
		got := r.Header.Get(csrfHeader)
		if got == "" {
			got = c.FormValue(csrfField)
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(ses.csrf)) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, "missing or invalid csrf token")
		}
		return next(c)
	}
}

func principal(c *echo.Context) Principal {
	p, _ := c.Get(ctxPrincipal).(Principal)
	return p
}

// viewer is what every page template knows about the caller.
func (s *Server) viewer(c *echo.Context) Viewer {
	p := s.proj(c)
	v := Viewer{Principal: principal(c), Path: c.Request().URL.Path, Now: s.now(),
		Project: p.name, Role: p.Role, Base: p.Base}
	if v.LoggedIn() {
		v.Projects = s.visibleProjects(v.Principal)
	}
	if ses, ok := c.Get(ctxSession).(*session); ok {
		v.CSRF = ses.csrf
		v.Cookie = true
	}
	return v
}

// Viewer describes the caller to templates: who they are, the project the
// page shows and their role in it, and the CSRF token every form embeds.
type Viewer struct {
	Principal Principal
	CSRF      string
	Cookie    bool
	Path      string
	// Now is the render time, from the server's clock.
	Now time.Time
	// Project is the project the page shows; Role is the caller's role in
	// it.
	Project string
	Role    Role
	// Base prefixes every link and form action of the project: "" for the
	// default project, "/projects/<name>" for the others.
	Base string
	// Projects are the projects the caller may read (the switcher).
	Projects []ProjectRole
}

// CanAct reports whether forms that change state are shown.
func (v Viewer) CanAct() bool { return v.Role.CanAct() }

// CanManage reports whether forms that manage the project (secrets, held
// plans) are shown.
func (v Viewer) CanManage() bool { return v.Role.CanManage() }

// LoggedIn reports whether the caller is authenticated.
func (v Viewer) LoggedIn() bool { return v.Principal.Role != "" }

// Link is path in the page's project: path prefixed with Base.
func (v Viewer) Link(path string) string { return v.Base + path }

// ProjectLink is path in project name (the switcher's links).
func (v Viewer) ProjectLink(name, path string) string {
	for _, p := range v.Projects {
		if p.Name == name && p.Default {
			return path
		}
	}
	return "/projects/" + name + path
}

func (s *Server) loginPage(c *echo.Context) error {
	return s.render(c, http.StatusOK, loginPage(safeNext(c.QueryParam("next")), "", s.deps.OIDC.Name()))
}

func (s *Server) login(c *echo.Context) error {
	next := safeNext(c.FormValue("next"))
	ip := c.RealIP()
	if !s.logins.allow(ip) {
		c.Response().Header().Set("Retry-After", "60")
		return s.render(c, http.StatusTooManyRequests, loginPage(next, "Too many failed attempts; wait a minute.", s.deps.OIDC.Name()))
	}
	p, ok := s.lookup(c, strings.TrimSpace(c.FormValue("token")))
	if !ok {
		s.logins.fail(ip)
		s.log.Warn("login_failed", "remote", ip)
		return s.render(c, http.StatusUnauthorized, loginPage(next, "That token is not valid.", s.deps.OIDC.Name()))
	}
	s.startSession(c, p)
	return c.Redirect(http.StatusSeeOther, next)
}

// startSession logs the browser in as p. The cookie carries Max-Age, a
// lifetime counted from receipt, rather than Expires, so a browser whose clock
// differs from the server's keeps the session for the same time (RFC 6265
// §5.3 step 3 gives Max-Age precedence).
func (s *Server) startSession(c *echo.Context, p Principal) {
	ses := s.sess.create(p)
	c.SetCookie(&http.Cookie{
		Name:     sessionCookie,
		Value:    ses.id,
		Path:     "/",
		HttpOnly: true,
		Secure:   c.IsTLS(),
		SameSite: http.SameSiteLaxMode,
		MaxAge:   max(1, int(ses.expires.Sub(s.sess.now())/time.Second)),
	})
}

func (s *Server) logout(c *echo.Context) error {
	if ck, err := c.Request().Cookie(sessionCookie); err == nil {
		if ses, ok := s.sess.get(ck.Value); ok {
			got := c.FormValue(csrfField)
			if subtle.ConstantTimeCompare([]byte(got), []byte(ses.csrf)) != 1 {
				return echo.NewHTTPError(http.StatusForbidden, "missing or invalid csrf token")
			}
			s.sess.delete(ses.id)
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps redirects after login on this site: next must be a local
// path (one leading slash, no scheme, host or user info once parsed and
// percent-decoded, no backslash or control character, which browsers strip
// or turn into slashes: "/\t/evil.example" is followed as
// "//evil.example"). Anything else becomes "/".
func safeNext(next string) string {
	if !localPath(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !localPath(u.Path) {
		return "/"
	}
	return (&url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery, Fragment: u.Fragment}).String()
}

// localPath reports whether p starts with exactly one slash and holds no
// backslash or control character.
func localPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool {
		return r == '\\' || unicode.IsControl(r)
	})
}

// loginFailures limits failed logins per client address: after maxFailures
// within a minute, further attempts are refused until the minute passes.
type loginFailures struct {
	mu  sync.Mutex
	m   map[string][]time.Time
	now func() time.Time
}

// maxLoginFailures is how many failed logins per minute one address gets.
const maxLoginFailures = 10

func newLoginFailures(now func() time.Time) *loginFailures {
	return &loginFailures{m: map[string][]time.Time{}, now: now}
}

func (l *loginFailures) recent(ip string) []time.Time {
	cut := l.now().Add(-time.Minute)
	ts := l.m[ip]
	i := 0
	for i < len(ts) && ts[i].Before(cut) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.m, ip)
	} else {
		l.m[ip] = ts
	}
	return ts
}

func (l *loginFailures) allow(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent(ip)) < maxLoginFailures
}

func (l *loginFailures) fail(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) > 10000 { // bound memory under a spray of addresses
		clear(l.m)
	}
	l.m[ip] = append(l.recent(ip), l.now())
}

// apiWhoami answers the caller as a Principal whose Projects are the
// projects it may read with its role in each (every project for a global
// admin).
func (s *Server) apiWhoami(c *echo.Context) error {
	p := principal(c)
	out := Principal{Name: p.Name, Role: p.Role, Projects: map[string]Role{}}
	for _, pr := range s.visibleProjects(p) {
		out.Projects[pr.Name] = pr.Role
	}
	return c.JSON(http.StatusOK, out)
}

// API is an API path of the page's project: "/api/v1" then Base then path.
func (v Viewer) API(path string) string { return "/api/v1" + v.Base + path }

// LinkIf is Link for a path that may be empty (no link): empty stays empty.
func (v Viewer) LinkIf(path string) string {
	if path == "" {
		return ""
	}
	return v.Link(path)
}
