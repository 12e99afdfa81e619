package runpod

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"hoist/backends/internal/jsonhttp"
)

// DefaultEndpoint is RunPod's GraphQL API (https://docs.runpod.io/sdks/graphql/manage-pods).
const DefaultEndpoint = "https://api.runpod.io/graphql"

// requestTimeout bounds one API call, as dstack's api_client.py (120 s).
const requestTimeout = 120 * time.Second

// client posts GraphQL requests to RunPod with a Bearer API key. RunPod
// has no Go SDK; the driver's few operations are fixed documents with
// variables (queries.go), and telling its answers apart needs both the
// HTTP status and the errors[] list (message, path, extensions.code) of a
// 200 answer, so a plain net/http client is all it takes.
type client struct {
	endpoint string
	key      string
	http     *http.Client
}

// A GraphQLError is one entry of a response's errors[].
type GraphQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Code is the error's extensions.code ("" when absent).
func (e GraphQLError) Code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// An APIError is a RunPod answer that failed: an HTTP status other than 200
// (401 for a bad key, 429, 5xx) or a 200 carrying errors[].
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Errors are the GraphQL errors, when the body had any.
	Errors []GraphQLError
	// Body is the start of a body that was not a GraphQL response.
	Body string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("runpod: HTTP %d", e.Status)
	for i, ge := range e.Errors {
		if i == 0 {
			s += ": "
		} else {
			s += "; "
		}
		s += ge.Message
		if c := ge.Code(); c != "" {
			s += " (" + c + ")"
		}
	}
	if len(e.Errors) == 0 && e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// do runs one GraphQL document with vars and decodes data into out.
func (c *client) do(ctx context.Context, op, query string, vars map[string]any, out any) error {
	status, body, err := jsonhttp.Do(ctx, c.http, http.MethodPost, c.endpoint, c.key,
		map[string]any{"query": query, "variables": vars}, 32<<20)
	if err != nil {
		return fmt.Errorf("runpod: %s: %w", op, err)
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []GraphQLError  `json:"errors"`
	}
	jsonErr := json.Unmarshal(body, &env)
	if status != http.StatusOK || len(env.Errors) > 0 {
		e := &APIError{Status: status, Errors: env.Errors}
		if jsonErr != nil || len(env.Errors) == 0 {
			e.Body = strings.TrimSpace(string(body[:min(len(body), 200)]))
		}
		return fmt.Errorf("%s: %w", op, e)
	}
	if jsonErr != nil {
		return fmt.Errorf("runpod: %s: decode response: %w", op, jsonErr)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("runpod: %s: decode data: %w", op, err)
	}
	return nil
}
