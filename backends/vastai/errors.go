package vastai

import (
	"errors"
	"fmt"
	"net/http"

	"hoist/backends"
)

// errNoSuchInstance is Vast.ai's error code for an instance it does not
// know (dstack's api_client.py ignores it on destroy).
const errNoSuchInstance = "no_such_instance"

// classify classifies an API error: 404 and no_such_instance wrap
// ErrNotFound; 429, 5xx and transport failures are transient; 401/403 (a
// refused key) and other client errors need the user (stalled).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return backends.Transient(err)
	}
	switch {
	case notFound(err):
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case ae.Status == http.StatusTooManyRequests || ae.Status >= 500:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// notFound reports whether err is Vast.ai's "no such instance".
func notFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Code == errNoSuchInstance)
}

// throttled reports whether err is Vast.ai's 429.
func throttled(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests
}
