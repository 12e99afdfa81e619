package vastai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"hoist/backends/internal/jsonhttp"
)

// DefaultEndpoint is Vast.ai's API base URL (dstack's api_client.py).
const DefaultEndpoint = "https://console.vast.ai/api/v0"

// requestTimeout bounds one API call (dstack's vastai backend uses 30 s).
const requestTimeout = 30 * time.Second

// client calls Vast.ai's REST API with a Bearer API key.
type client struct {
	base string
	key  string
	http *http.Client
}

func newClient(base, key string, hc *http.Client) *client {
	if hc == nil {
		hc = &http.Client{Timeout: requestTimeout}
	}
	return &client{base: strings.TrimSuffix(base, "/"), key: key, http: hc}
}

// An APIError is a non-2xx answer of Vast.ai ({"success": false, "error":
// "no_such_instance", "msg": "..."}) with its HTTP status; Body holds the
// answer when it is not that JSON (a proxy's 429 or 5xx page).
type APIError struct {
	Status int    `json:"-"`
	Code   string `json:"error"`
	Msg    string `json:"msg"`
	// Message is what some endpoints answer instead of msg.
	Message string `json:"message"`
	Body    string `json:"-"`
	// raw is the whole answer, for a caller that reads more of it.
	raw []byte
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("vastai: HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	switch {
	case e.Msg != "":
		s += ": " + e.Msg
	case e.Body != "":
		s += ": " + e.Body
	}
	return s
}

// do calls method path with body in (JSON, when not nil) and decodes the
// answer into out (when not nil). A non-2xx answer is an *APIError; a
// transport failure is returned wrapped.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	status, b, err := jsonhttp.Do(ctx, c.http, method, c.base+path, c.key, in, 32<<20)
	if err != nil {
		return fmt.Errorf("vastai: %s %s: %w", method, path, err)
	}
	if status < 200 || status > 299 {
		e := &APIError{}
		if json.Unmarshal(b, e) == nil && e.Msg == "" {
			e.Msg = e.Message
		}
		if e.Code == "" && e.Msg == "" {
			e = &APIError{Body: strings.TrimSpace(string(b[:min(len(b), 200)]))}
		}
		e.Status = status
		e.raw = b
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("vastai: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Wire types of the calls hoist makes; the field names are Vast.ai's
// (vast.py's search offers and show instances columns).

// ask is one offer of POST /bundles/ ({"offers": [...]}).
type ask struct {
	ID                int64    `json:"id"`
	GPUName           string   `json:"gpu_name"`
	NumGPUs           int      `json:"num_gpus"`
	GPURAM            float64  `json:"gpu_ram"` // MB per GPU
	CPUCores          *float64 `json:"cpu_cores"`
	CPUCoresEffective float64  `json:"cpu_cores_effective"`
	CPURAM            float64  `json:"cpu_ram"` // MB
	DiskSpace         float64  `json:"disk_space"`
	DPHTotal          float64  `json:"dph_total"`
	MinBid            *float64 `json:"min_bid"`
	Geolocation       string   `json:"geolocation"`
	Datacenter        bool     `json:"datacenter"`
}

// instance is one of the account's instances (GET /instances/).
type instance struct {
	ID             int64                    `json:"id"`
	Label          *string                  `json:"label"`
	ActualStatus   *string                  `json:"actual_status"`
	IntendedStatus *string                  `json:"intended_status"`
	CurState       *string                  `json:"cur_state"`
	NextState      *string                  `json:"next_state"`
	StatusMsg      *string                  `json:"status_msg"`
	PublicIPAddr   *string                  `json:"public_ipaddr"`
	Ports          map[string][]portBinding `json:"ports"`
	DPHTotal       float64                  `json:"dph_total"`
	IsBid          bool                     `json:"is_bid"`
	Geolocation    *string                  `json:"geolocation"`
	StartDate      *float64                 `json:"start_date"` // Unix seconds
}

// portBinding is Docker's port mapping as Vast.ai shows it.
type portBinding struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// createRequest is the body of PUT /asks/<id>/ (dstack's api_client.py
// create_instance; vast.py create instance).
type createRequest struct {
	ClientID   string            `json:"client_id"`
	Image      string            `json:"image"`
	Disk       float64           `json:"disk"`
	Label      string            `json:"label"`
	Price      *float64          `json:"price"`
	Env        map[string]string `json:"env"`
	User       string            `json:"user"`
	Onstart    string            `json:"onstart"`
	Args       []string          `json:"args"`
	Runtype    string            `json:"runtype"`
	ImageLogin *string           `json:"image_login"`
	PythonUTF8 bool              `json:"python_utf8"`
	LangUTF8   bool              `json:"lang_utf8"`
	JupyterLab bool              `json:"use_jupyter_lab"`
	JupyterDir *string           `json:"jupyter_dir"`
	CreateFrom *string           `json:"create_from"`
	Force      bool              `json:"force"`
}

// createAnswer is the answer of PUT /asks/<id>/.
type createAnswer struct {
	Success     bool   `json:"success"`
	NewContract *int64 `json:"new_contract"`
	Error       string `json:"error"`
	Msg         string `json:"msg"`
}

func (c *client) bundles(ctx context.Context, query map[string]any) ([]ask, error) {
	var out struct {
		Offers []ask `json:"offers"`
	}
	return out.Offers, c.do(ctx, http.MethodPost, "/bundles/", query, &out)
}

func (c *client) instances(ctx context.Context) ([]instance, error) {
	var out struct {
		Instances []instance `json:"instances"`
	}
	return out.Instances, c.do(ctx, http.MethodGet, "/instances/", nil, &out)
}

// instance returns instance id; nil when Vast.ai answers without it.
func (c *client) instance(ctx context.Context, id string) (*instance, error) {
	var out struct {
		Instances *instance `json:"instances"`
	}
	return out.Instances, c.do(ctx, http.MethodGet, "/instances/"+id+"/", nil, &out)
}

// create rents ask id. The answer is returned as is, with the HTTP error
// (an *APIError) when the status was not 2xx, so that a contract created
// anyway is not lost.
func (c *client) create(ctx context.Context, askID string, req createRequest) (createAnswer, error) {
	var out createAnswer
	err := c.do(ctx, http.MethodPut, "/asks/"+askID+"/", req, &out)
	var ae *APIError
	if errors.As(err, &ae) {
		_ = json.Unmarshal(ae.raw, &out)
	}
	return out, err
}

func (c *client) destroy(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/instances/"+id+"/", nil, nil)
}
