package lambda

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

// DefaultEndpoint is Lambda's API base URL (https://docs.lambda.ai/api/cloud).
const DefaultEndpoint = "https://cloud.lambda.ai/api/v1"

// requestTimeout bounds one API call, as dstack's api_client.py (120 s).
const requestTimeout = 120 * time.Second

// client calls the Lambda Cloud API with a Bearer API key.
type client struct {
	base string
	key  string
	http *http.Client
}

func newClient(base, key string) *client {
	return &client{base: strings.TrimSuffix(base, "/"), key: key, http: &http.Client{Timeout: requestTimeout}}
}

// An APIError is Lambda's error response
// ({"error":{"code","message","suggestion"}}) with its HTTP status.
type APIError struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("lambda: HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Suggestion != "" {
		s += " (" + e.Suggestion + ")"
	}
	return s
}

// do calls method path with body in (JSON, when not nil) and decodes the
// response's data into out (when not nil). A non-2xx response is an
// *APIError; a transport failure is returned as is.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	status, b, err := jsonhttp.Do(ctx, c.http, method, c.base+path, c.key, in, 32<<20)
	if err != nil {
		return fmt.Errorf("lambda: %s %s: %w", method, path, err)
	}
	if status < 200 || status > 299 {
		var eb struct {
			Error *APIError `json:"error"`
		}
		e := &APIError{}
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			e = eb.Error
		} else {
			e.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		e.Status = status
		return e
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("lambda: %s %s: decode response: %w", method, path, err)
	}
	if len(env.Data) == 0 {
		return errors.New("lambda: " + method + " " + path + ": response without data")
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("lambda: %s %s: decode data: %w", method, path, err)
	}
	return nil
}

// Wire types of the calls hoist makes.

type region struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type instanceTypeInfo struct {
	Name              string `json:"name"`
	PriceCentsPerHour int    `json:"price_cents_per_hour"`
}

type instanceTypeEntry struct {
	InstanceType                 instanceTypeInfo `json:"instance_type"`
	RegionsWithCapacityAvailable []region         `json:"regions_with_capacity_available"`
}

type instance struct {
	ID           string           `json:"id"`
	Name         string           `json:"name"`
	IP           string           `json:"ip"`
	PrivateIP    string           `json:"private_ip"`
	Status       string           `json:"status"`
	SSHKeyNames  []string         `json:"ssh_key_names"`
	Region       region           `json:"region"`
	InstanceType instanceTypeInfo `json:"instance_type"`
}

type sshKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
}

type launchRequest struct {
	RegionName       string       `json:"region_name"`
	InstanceTypeName string       `json:"instance_type_name"`
	SSHKeyNames      []string     `json:"ssh_key_names"`
	FileSystemNames  []string     `json:"file_system_names"`
	Quantity         int          `json:"quantity"`
	Name             string       `json:"name"`
	Image            *launchImage `json:"image,omitempty"`
}

type launchImage struct {
	Family string `json:"family"`
}

func (c *client) instanceTypes(ctx context.Context) (map[string]instanceTypeEntry, error) {
	var out map[string]instanceTypeEntry
	return out, c.do(ctx, http.MethodGet, "/instance-types", nil, &out)
}

func (c *client) instances(ctx context.Context) ([]instance, error) {
	var out []instance
	return out, c.do(ctx, http.MethodGet, "/instances", nil, &out)
}

func (c *client) instance(ctx context.Context, id string) (instance, error) {
	var out instance
	return out, c.do(ctx, http.MethodGet, "/instances/"+id, nil, &out)
}

func (c *client) launch(ctx context.Context, req launchRequest) (string, error) {
	var out struct {
		InstanceIDs []string `json:"instance_ids"`
	}
	if err := c.do(ctx, http.MethodPost, "/instance-operations/launch", req, &out); err != nil {
		return "", err
	}
	if len(out.InstanceIDs) != 1 {
		return "", fmt.Errorf("lambda: launch returned %d instance ids, want 1", len(out.InstanceIDs))
	}
	return out.InstanceIDs[0], nil
}

func (c *client) terminate(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/instance-operations/terminate", map[string]any{"instance_ids": []string{id}}, nil)
}

func (c *client) sshKeys(ctx context.Context) ([]sshKey, error) {
	var out []sshKey
	return out, c.do(ctx, http.MethodGet, "/ssh-keys", nil, &out)
}

func (c *client) addSSHKey(ctx context.Context, name, pub string) (sshKey, error) {
	var out sshKey
	return out, c.do(ctx, http.MethodPost, "/ssh-keys", map[string]string{"name": name, "public_key": pub}, &out)
}

func (c *client) deleteSSHKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/ssh-keys/"+id, nil, nil)
}
