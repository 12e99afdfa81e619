package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// defaultLongPoll is how long one long-poll request waits on the agent when
// the http.Client has no timeout of its own.
var defaultLongPoll = 25 * time.Second

// longPollGrace is how much longer than the wait it asked for a long-poll
// request may take before the client gives up on the agent: an agent that
// accepts a connection and never answers must not hold its caller forever.
var longPollGrace = 15 * time.Second

// localUnixClient reaches agents on this machine's Unix sockets, for
// clients made without an http.Client of their own.
var localUnixClient = &http.Client{Transport: NewLocalTransport()}

// agentClient is the part shared by ShimClient and RunnerClient: JSON over
// HTTP with the API version checked on every response.
type agentClient struct {
	base    string
	hc      *http.Client
	service string
	want    int
	token   string // bearer token, when the agent demands one
}

func newAgentClient(baseURL string, hc *http.Client, service string, want int) agentClient {
	if hc == nil {
		hc = http.DefaultClient
		if _, ok := SocketPath(baseURL); ok {
			hc = localUnixClient
		}
	}
	return agentClient{base: BaseURL(baseURL), hc: hc, service: service, want: want}
}

// longPoll returns how long the agent should hold one long-poll request:
// below the http.Client's own timeout, if it has one.
func (c *agentClient) longPoll() time.Duration {
	d := defaultLongPoll
	if t := c.hc.Timeout; t > 0 && t/2 < d {
		d = t / 2
	}
	return d
}

// checkVersion refuses a response of an agent that speaks another API version.
func (c *agentClient) checkVersion(resp *http.Response) error {
	v := resp.Header.Get(APIVersionHeader)
	if v == "" {
		return &IncompatibleError{Service: c.service, Want: c.want, Detail: fmt.Sprintf("%s %s answered http %d without an api version; it is not a %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, c.service)}
	}
	got, err := strconv.Atoi(v)
	if err != nil || got != c.want {
		return &IncompatibleError{Service: c.service, Want: c.want, Got: got}
	}
	return nil
}

// send performs one request and checks version and status. The caller closes
// the body of the returned response.
func (c *agentClient) send(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.service, err)
	}
	if err := c.checkVersion(resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, fmt.Errorf("%s %s %s: %w", c.service, method, path, answerError(resp))
	}
	return resp, nil
}

// answerError reads an agent's error answer: its JSON Error, or its body
// as the message.
func answerError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}

// do sends in (JSON, unless nil) and decodes the answer into out (unless nil).
func (c *agentClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s request: %w", path, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.send(ctx, method, path, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s %s: decode answer: %w", c.service, method, path, err)
	}
	return nil
}

// health asks the unversioned health check and checks service and version.
func (c *agentClient) health(ctx context.Context) (Health, error) {
	var h Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+HealthPath, nil)
	if err != nil {
		return h, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return h, fmt.Errorf("%s: %w", c.service, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return h, fmt.Errorf("%s health check: %w", c.service, &Error{Status: resp.StatusCode, Message: "missing or wrong token"})
	}
	if resp.StatusCode != http.StatusOK {
		return h, &IncompatibleError{Service: c.service, Want: c.want, Detail: fmt.Sprintf("health check answered http %d", resp.StatusCode)}
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, &IncompatibleError{Service: c.service, Want: c.want, Detail: fmt.Sprintf("health check answer: %v", err)}
	}
	if h.Service != c.service {
		return h, &IncompatibleError{Service: c.service, Want: c.want, Got: h.APIVersion, Detail: fmt.Sprintf("the agent is %q, not %s", h.Service, c.service)}
	}
	if h.APIVersion != c.want {
		return h, &IncompatibleError{Service: c.service, Want: c.want, Got: h.APIVersion}
	}
	return h, c.checkVersion(resp)
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
