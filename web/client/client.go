// Package client is the Go client of hoist's JSON API (web/API.md): the
// `hoist` command line makes every call to a server through it. Requests and
// answers are web's own types, so the server and its clients share one
// definition of each.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/web"
)

// DefaultServer is the server's URL when neither a flag, the environment
// nor the config file names one (`hoist serve`'s default address).
const DefaultServer = "http://127.0.0.1:8080"

// callTimeout bounds one request that is not a stream.
const callTimeout = time.Minute

// Errors a call returns (wrapped in *Error) for the server's 401, 403 and
// 404 answers; test them with errors.Is.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
)

// Error is a server's answer other than 200: its status and the message of
// its JSON body (web.APIError).
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is the server's message, or the status text without one.
	Message string
}

// Error says what the server answered.
func (e *Error) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Is matches ErrUnauthorized, ErrForbidden and ErrNotFound by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// Client calls one hoist server. The zero HTTP uses a client without a
// timeout (streams last as long as their context); calls that are not
// streams are bounded by callTimeout.
type Client struct {
	// BaseURL is the server's URL, without /api/v1.
	BaseURL string
	// Token is the bearer token sent with every call.
	Token string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// Project is the project the project routes address (web/API.md
	// "Projects"): "" is the server's default project, at the unprefixed
	// routes; another name puts /projects/{Project} before them. The
	// global routes (whoami, projects, users, members, tokens) ignore it.
	Project string
}

// Options are where New looks for the server and the token, most
// important first: the flags' values, then HOIST_URL and HOIST_TOKEN, then
// the config file `hoist login` wrote, then DefaultServer and the admin
// token in DataDir.
type Options struct {
	// Server, Token and Project are the command line's values ("" when
	// not given). Project falls back on HOIST_PROJECT, then on the config
	// file's project when the server is the config file's, then on the
	// server's default project.
	Server, Token, Project string
	// ConfigPath is the config file; "" means DefaultConfigPath.
	ConfigPath string
	// DataDir holds the local server's admin-token file, the last resort.
	DataDir string
}

// Config is the file `hoist login` writes (JSON, mode 0600).
type Config struct {
	// Server is the server's URL.
	Server string `json:"server"`
	// Token is the API token.
	Token string `json:"token"`
	// Project is the project the commands address on Server; "" is the
	// server's default project.
	Project string `json:"project,omitempty"`
}

// DefaultConfigPath is hoist/config.json under the user's config
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux).
func DefaultConfigPath() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(d, "hoist", "config.json"), nil
}

// ReadConfig reads the config file at path; a missing file is an empty
// Config.
func ReadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read the config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read the config %s: %w", path, err)
	}
	return c, nil
}

// WriteConfig writes c to path with mode 0600 (its directory 0700), replacing
// the file whole.
func WriteConfig(path string, c Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write the config: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return fmt.Errorf("write the config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write the config: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write the config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the config: %w", err)
	}
	return nil
}

// New resolves the server and the token from o (see Options) and returns a
// client for them. It fails only when no token is found anywhere or the
// config file is unreadable.
func New(o Options) (*Client, error) {
	c := &Client{BaseURL: o.Server, Token: o.Token, Project: o.Project}
	if c.BaseURL == "" {
		c.BaseURL = os.Getenv("HOIST_URL")
	}
	if c.Token == "" {
		c.Token = os.Getenv("HOIST_TOKEN")
	}
	if c.Project == "" {
		c.Project = os.Getenv("HOIST_PROJECT")
	}
	if c.BaseURL == "" || c.Token == "" || c.Project == "" {
		path := o.ConfigPath
		if path == "" {
			var err error
			if path, err = DefaultConfigPath(); err != nil {
				return nil, err
			}
		}
		cfg, err := ReadConfig(path)
		if err != nil {
			return nil, err
		}
		if c.BaseURL == "" {
			c.BaseURL = cfg.Server
		}
		if c.Token == "" {
			c.Token = cfg.Token
		}
		// The login's project is a project of the login's server: another
		// server gets its default project.
		if c.Project == "" && cfg.Server != "" && strings.TrimRight(c.BaseURL, "/") == strings.TrimRight(cfg.Server, "/") {
			c.Project = cfg.Project
		}
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultServer
	}
	if c.Token == "" {
		c.Token = os.Getenv("HOIST_ADMIN_TOKEN")
	}
	if c.Token == "" && o.DataDir != "" {
		b, err := os.ReadFile(filepath.Join(o.DataDir, "admin-token"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read the admin token: %w", err)
		}
		c.Token = strings.TrimSpace(string(b))
	}
	if c.Token == "" {
		return nil, errors.New("no API token: give --token, set HOIST_TOKEN or run `hoist login`")
	}
	return c, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// route is an API path below /api/v1. Only projectPath and globalPath
// make one, so that every call says whether its route belongs to a project
// (and then honours Client.Project) or is global.
type route struct{ path string }

// projectPath is path (e.g. "/runs") in the client's project: as written
// for the default project, below /projects/{Project} for another
// (web/routes.go's projectRoutes).
func (c *Client) projectPath(path string) route {
	if c.Project == "" {
		return route{path}
	}
	return route{"/projects/" + url.PathEscape(c.Project) + path}
}

// globalPath is path outside any project (whoami, projects, users,
// members, tokens).
func globalPath(path string) route { return route{path} }

// fullURL is r's full URL with the query q.
func (c *Client) fullURL(r route, q url.Values) string {
	u := strings.TrimRight(c.BaseURL, "/") + "/api/v1" + r.path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends one request to r and returns the answer when it is 200; other
// answers become *Error. The caller closes the body.
func (c *Client) do(ctx context.Context, method string, r route, q url.Values, body any) (*http.Response, error) {
	u := c.fullURL(r, q)
	path := r.path
	var rb io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rb = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rb)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	// 201 Created and 204 No Content answer the users API's creates and
	// deletes.
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e web.APIError
	_ = json.Unmarshal(b, &e)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return nil, &Error{Status: resp.StatusCode, Message: e.Message}
}

// call sends one request that is not a stream and decodes a JSON answer
// into out (when not nil).
func (c *Client) call(ctx context.Context, method string, r route, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.do(ctx, method, r, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, r.path, err)
	}
	return nil
}

// RunsQuery narrows Runs; empty fields match everything.
type RunsQuery struct {
	// Status, Type and Fleet match the run's fields exactly.
	Status, Type, Fleet string
	// Limit caps the result; 0 means the server's default (all).
	Limit int
}

// Runs lists runs, most recently submitted first, without their jobs
// (GET /api/v1/runs).
func (c *Client) Runs(ctx context.Context, f RunsQuery) ([]web.Run, error) {
	q := url.Values{}
	setIf(q, "status", f.Status)
	setIf(q, "type", f.Type)
	setIf(q, "fleet", f.Fleet)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out []web.Run
	return out, c.call(ctx, http.MethodGet, c.projectPath("/runs"), q, nil, &out)
}

// Run returns one run with its jobs and spec (GET /api/v1/runs/{name});
// ErrNotFound when there is none.
func (c *Client) Run(ctx context.Context, name string) (web.Run, error) {
	var out web.Run
	return out, c.call(ctx, http.MethodGet, c.projectPath("/runs/"+url.PathEscape(name)), nil, nil, &out)
}

// LogsQuery selects the lines Logs writes.
type LogsQuery struct {
	// Job is a job id, submission id or number; "" is the newest.
	Job string
	// After is a log sequence number: only lines after it.
	After int64
	// Since drops lines written before it; zero keeps all.
	Since time.Time
	// Limit caps the lines read; 0 means all.
	Limit int
	// Follow keeps reading new lines until the job finishes or ctx ends.
	Follow bool
}

// Logs copies a run's job output to w, one line per line
// (GET /api/v1/runs/{name}/logs). With q.Follow it returns when the job
// finished and its last line was written, or when ctx ends (then with
// ctx's error).
func (c *Client) Logs(ctx context.Context, name string, q LogsQuery, w io.Writer) error {
	v := url.Values{}
	setIf(v, "job", q.Job)
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Follow {
		v.Set("follow", "true")
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	resp, err := c.do(ctx, http.MethodGet, c.projectPath("/runs/"+url.PathEscape(name)+"/logs"), v, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("read the logs of %s: %w", name, err)
	}
	return nil
}

// Stop asks the server to stop a run (POST /api/v1/runs/{name}/stop):
// gracefully, or with abort at once, without the jobs' stop_duration
// (?abort=true). ErrNotFound when there is none.
func (c *Client) Stop(ctx context.Context, name string, abort bool) (web.ActionDone, error) {
	var q url.Values
	if abort {
		q = url.Values{"abort": {"true"}}
	}
	var out web.ActionDone
	return out, c.call(ctx, http.MethodPost, c.projectPath("/runs/"+url.PathEscape(name)+"/stop"), q, nil, &out)
}

// EventsQuery narrows Events; empty fields match everything.
type EventsQuery struct {
	// Kind is the object kind (run, fleet, sync, …) and Name its name.
	Kind, Name string
	// Revision matches events of one revision.
	Revision string
	// Limit caps the result; 0 means the server's default (200).
	Limit int
}

// Events lists events of the audit trail, newest first
// (GET /api/v1/events).
func (c *Client) Events(ctx context.Context, f EventsQuery) ([]web.Event, error) {
	q := url.Values{}
	setIf(q, "kind", f.Kind)
	setIf(q, "name", f.Name)
	setIf(q, "revision", f.Revision)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out []web.Event
	return out, c.call(ctx, http.MethodGet, c.projectPath("/events"), q, nil, &out)
}

// Audit returns the project's audit (GET /api/v1/audit), computed by the
// server now: what is leaked, lost and duplicated at its backends.
func (c *Client) Audit(ctx context.Context) (web.Audit, error) {
	var out web.Audit
	return out, c.call(ctx, http.MethodGet, c.projectPath("/audit"), nil, nil, &out)
}

// FollowEvents calls fn with the events Events returns that it has not
// seen, oldest first: first the current ones, then new ones, polling every
// interval (the API has no event stream), until ctx ends (its error is
// returned) or fn fails.
func (c *Client) FollowEvents(ctx context.Context, f EventsQuery, interval time.Duration, fn func(web.Event) error) error {
	seen := map[string]bool{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		evs, err := c.Events(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if seen[evs[i].ID] {
				continue
			}
			seen[evs[i].ID] = true
			if err := fn(evs[i]); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Secrets lists the secrets' names and times, never values
// (GET /api/v1/secrets).
func (c *Client) Secrets(ctx context.Context) ([]web.Secret, error) {
	var out []web.Secret
	return out, c.call(ctx, http.MethodGet, c.projectPath("/secrets"), nil, nil, &out)
}

// Secret returns a secret's value (GET /api/v1/secrets/{name}; admins and
// users).
func (c *Client) Secret(ctx context.Context, name string) (string, error) {
	var out web.SecretValue
	return out.Value, c.call(ctx, http.MethodGet, c.projectPath("/secrets/"+url.PathEscape(name)), nil, nil, &out)
}

// SetSecret creates or replaces a secret (PUT /api/v1/secrets/{name}).
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	return c.call(ctx, http.MethodPut, c.projectPath("/secrets/"+url.PathEscape(name)), nil, web.SecretValue{Value: value}, nil)
}

// DeleteSecret deletes a secret (DELETE /api/v1/secrets/{name}).
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, c.projectPath("/secrets/"+url.PathEscape(name)), nil, nil, nil)
}

// Plan plans req against the server's state without applying anything
// (POST /api/v1/plan).
func (c *Client) Plan(ctx context.Context, req web.PlanRequest) (web.Plan, error) {
	var out web.Plan
	return out, c.call(ctx, http.MethodPost, c.projectPath("/plan"), nil, req, &out)
}

// Artifacts lists a run's artifact files, by job number and path, or job
// jobNum's only when it is not negative (GET /api/v1/runs/{name}/artifacts);
// ErrNotFound when there is no such run.
func (c *Client) Artifacts(ctx context.Context, run string, jobNum int) ([]web.Artifact, error) {
	var q url.Values
	if jobNum >= 0 {
		q = url.Values{"job": {strconv.Itoa(jobNum)}}
	}
	var out []web.Artifact
	return out, c.call(ctx, http.MethodGet, c.projectPath("/runs/"+url.PathEscape(run)+"/artifacts"), q, nil, &out)
}

// Artifact opens one artifact file of a run (GET
// /api/v1/runs/{name}/artifacts/{job}/{path…}) and returns its body and
// its length (-1 when the server did not say). ctx alone bounds the
// download; the caller closes the body.
func (c *Client) Artifact(ctx context.Context, run string, jobNum int, file string) (io.ReadCloser, int64, error) {
	resp, err := c.do(ctx, http.MethodGet, c.projectPath(web.ArtifactPath(run, jobNum, file)), nil, nil)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

func setIf(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// Whoami returns the principal the token authenticates
// (GET /api/v1/whoami).
func (c *Client) Whoami(ctx context.Context) (web.Principal, error) {
	var out web.Principal
	return out, c.call(ctx, http.MethodGet, globalPath("/whoami"), nil, nil, &out)
}

// DialSSH opens an SSH connection to a job of run (GET
// /api/v1/runs/{name}/ssh): jobID picks a submission (its id or number; ""
// is the newest running job) and pubKey is the user's public key in
// authorized_keys form, which the job accepts for this connection. The
// returned conn speaks SSH, the job being the server, and hostKey is the
// job's host key (authorized_keys form) for the caller to pin. ctx bounds
// the request only: the connection lives until closed. Errors are *Error
// as for the other calls: 404 (ErrNotFound) when the run or job is not
// there or has ended, 409 while the job is not running yet.
func (c *Client) DialSSH(ctx context.Context, run, jobID, pubKey string) (conn net.Conn, hostKey string, err error) {
	var q url.Values
	if jobID != "" {
		q = url.Values{"job": {jobID}}
	}
	u := c.fullURL(c.projectPath("/runs/"+url.PathEscape(run)+"/ssh"), q)
	// The request's context must outlive the answer: the transport closes
	// the switched connection when it is cancelled.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	fail := func(err error) (net.Conn, string, error) {
		cancel()
		return nil, "", fmt.Errorf("ssh into %s: %w", run, err)
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", web.SSHUpgrade)
	req.Header.Set(web.SSHUserKeyHeader, pubKey)
	// The same transport (TLS, proxies) as the other calls, without a
	// client timeout, which would cut the connection.
	hc := *c.httpClient()
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if !stop() {
		err = errors.Join(err, ctx.Err())
		if resp != nil {
			resp.Body.Close()
			resp = nil
		}
	}
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e web.APIError
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return fail(&Error{Status: resp.StatusCode, Message: e.Message})
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return fail(errors.New("the switched connection is not writable"))
	}
	return api.NewUpgradedConn(rwc, cancel), resp.Header.Get(web.SSHHostKeyHeader), nil
}
