package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// Do sends method url with in as its JSON body (none when in is nil) and
// the bearer token (none when empty), asking for JSON, and returns the
// answer's status and at most limit bytes of its body. Errors (encoding,
// transport, reading) are returned as they are, for the caller to name the
// call.
func Do(ctx context.Context, hc *http.Client, method, url, bearer string, in any, limit int64) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, b, err
}
