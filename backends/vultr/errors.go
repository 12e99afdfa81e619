package vultr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"hoist/backends"
)

// govultr turns an error answer into an error of its body's text and drops
// the HTTP status, so the client's transport records the status of each
// call in the call's context and classify reads it from there.

type statusKey struct{}

// A call records the last HTTP status of one API call (after retries).
type call struct{ code atomic.Int32 }

// track returns ctx carrying a fresh call record.
func track(ctx context.Context) (context.Context, *call) {
	c := &call{}
	return context.WithValue(ctx, statusKey{}, c), c
}

// transport authenticates each request with the API key (Bearer, as
// Vultr's API docs say) and records its status in the call's record.
type transport struct {
	key  string
	base http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	res, err := t.base.RoundTrip(r)
	if c, ok := r.Context().Value(statusKey{}).(*call); ok && res != nil {
		c.code.Store(int32(res.StatusCode))
	}
	return res, err
}

// classify classifies an API error by its status: 404 wraps ErrNotFound;
// 401 and 403 (an invalid or under-privileged API key, dstack's
// invalid credentials) and other client errors need the user (stalled); 429
// (rate limit), 5xx and network errors are transient.
func classify(c *call, op string, err error) error {
	if err == nil {
		return nil
	}
	code := int(c.code.Load())
	err = fmt.Errorf("vultr: %s: %w", op, err)
	switch {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case code == 0, code == http.StatusTooManyRequests, code >= 500:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// capacityMessages are what Vultr answers (400) when a plan cannot be had
// in a location now: sold out, out of stock, not available there.
var capacityMessages = []string{"out of stock", "sold out", "sold-out", "not available", "insufficient", "no available"}

// classifyCreate classifies a create error: a 400 about stock or a plan's
// availability in the location wraps ErrNoCapacity (the reconciler tries
// the next offer, as dstack does on any create error; Vultr says a plan is
// "temporarily sold-out"); the rest as
// classify.
func classifyCreate(c *call, op string, err error) error {
	if err == nil {
		return nil
	}
	if c.code.Load() == http.StatusBadRequest {
		msg := strings.ToLower(err.Error())
		for _, m := range capacityMessages {
			if strings.Contains(msg, m) {
				return fmt.Errorf("%w: vultr: %s: %w", backends.ErrNoCapacity, op, err)
			}
		}
	}
	return classify(c, op, err)
}

// notFound says whether err is a classified 404.
func notFound(err error) bool { return errors.Is(err, backends.ErrNotFound) }
