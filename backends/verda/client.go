package verda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"hoist/backends/internal/jsonhttp"
)

// DefaultEndpoint is Verda's API base URL.
const DefaultEndpoint = "https://api.verda.com/v1"

// tokenMargin renews an access token this long before it expires.
const tokenMargin = time.Minute

// An APIError is an error answer of the API: its HTTP status and body
// ({"code","message"}, https://docs.verda.com/api).
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	// Op is the call that failed ("POST /instances").
	Op string `json:"-"`
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("verda: %s: %d %s: %s", e.Op, e.Status, e.Code, msg)
	}
	return fmt.Sprintf("verda: %s: %d: %s", e.Op, e.Status, msg)
}

// client is a small client of Verda's REST API.
type client struct {
	base         string
	clientID     string
	clientSecret string
	http         *http.Client
	now          func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
}

func newClient(base, id, secret string, now func() time.Time) *client {
	return &client{base: strings.TrimSuffix(base, "/"), clientID: id, clientSecret: secret,
		http: &http.Client{Timeout: 60 * time.Second}, now: now}
}

// accessToken returns a valid access token, asking for one with the client
// credentials when there is none or it is about to expire.
func (c *client) accessToken(ctx context.Context, renew bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !renew && c.token != "" && c.now().Before(c.expires.Add(-tokenMargin)) {
		return c.token, nil
	}
	body := map[string]string{
		"grant_type": "client_credentials", "client_id": c.clientID, "client_secret": c.clientSecret,
	}
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if _, err := c.send(ctx, http.MethodPost, "/oauth2/token", "", body, &out); err != nil {
		return "", err
	}
	if out.AccessToken == "" {
		return "", &APIError{Status: http.StatusUnauthorized, Op: "POST /oauth2/token", Message: "no access token in the answer"}
	}
	c.token, c.expires = out.AccessToken, c.now().Add(time.Duration(out.ExpiresIn)*time.Second)
	return c.token, nil
}

// do calls the API with a bearer token (renewed once on 401) and decodes a
// JSON answer into out, or a plain-text one into *string. It returns the
// HTTP status.
func (c *client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	for attempt := 0; ; attempt++ {
		tok, err := c.accessToken(ctx, attempt > 0)
		if err != nil {
			return 0, err
		}
		code, err := c.send(ctx, method, path, tok, in, out)
		var ae *APIError
		if attempt == 0 && errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			continue
		}
		return code, err
	}
}

// send makes one request.
func (c *client) send(ctx context.Context, method, path, token string, in, out any) (int, error) {
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	status, b, err := jsonhttp.Do(ctx, c.http, method, c.base+path, token, in, 16<<20)
	if err != nil {
		return status, fmt.Errorf("verda: %s: %w", op, err)
	}
	if status >= 300 {
		ae := &APIError{Status: status, Op: op}
		if json.Unmarshal(b, ae) != nil || ae.Message == "" && ae.Code == "" {
			ae.Message = strings.TrimSpace(string(b))
		}
		return status, ae
	}
	switch o := out.(type) {
	case nil:
	case *string:
		// A created resource's id, as plain text (or a JSON string).
		s := strings.TrimSpace(string(b))
		var js string
		if json.Unmarshal(b, &js) == nil {
			s = js
		}
		*o = s
	default:
		if err := json.Unmarshal(b, out); err != nil {
			return status, fmt.Errorf("verda: %s: decoding the answer: %w", op, err)
		}
	}
	return status, nil
}

// instance is an instance as the API shows it.
type instance struct {
	ID              string   `json:"id"`
	InstanceType    string   `json:"instance_type"`
	Image           string   `json:"image"`
	Hostname        string   `json:"hostname"`
	Description     string   `json:"description"`
	IP              *string  `json:"ip"`
	Status          string   `json:"status"`
	CreatedAt       string   `json:"created_at"`
	SSHKeyIDs       []string `json:"ssh_key_ids"`
	StartupScriptID *string  `json:"startup_script_id"`
	Location        string   `json:"location"`
	IsSpot          bool     `json:"is_spot"`
}

// createInstance is POST /instances' body.
type createInstance struct {
	InstanceType    string    `json:"instance_type"`
	Image           string    `json:"image"`
	SSHKeyIDs       []string  `json:"ssh_key_ids"`
	Hostname        string    `json:"hostname"`
	Description     string    `json:"description"`
	StartupScriptID string    `json:"startup_script_id,omitempty"`
	Pricing         string    `json:"pricing"`
	IsSpot          bool      `json:"is_spot"`
	LocationCode    string    `json:"location_code"`
	OSVolume        *osVolume `json:"os_volume,omitempty"`
}

type osVolume struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// locationAvailability is one entry of GET /instance-availability.
type locationAvailability struct {
	LocationCode   string   `json:"location_code"`
	Availabilities []string `json:"availabilities"`
}
