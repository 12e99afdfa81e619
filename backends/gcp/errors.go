package gcp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/auth"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"hoist/backends"
)

// apiError returns the HTTP status and first reason of a Compute error
// (https://cloud.google.com/compute/docs/api/handling-errors); 0 when err
// is not one.
func apiError(err error) (code int, reason string) {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if len(ge.Errors) > 0 {
			reason = ge.Errors[0].Reason
		}
		return ge.Code, reason
	}
	return 0, ""
}

// Reasons that change what a status means.
var (
	// throttledReasons are rate limits, which Compute Engine may answer
	// with 403 (https://cloud.google.com/compute/docs/api/rest-api-rate-limits).
	throttledReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true}
	// quotaReasons are quota errors: this offer cannot be had, another may.
	quotaReasons = map[string]bool{"quotaExceeded": true, "QUOTA_EXCEEDED": true}
)

// Operation error codes that mean no capacity in the zone
// (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability).
var capacityCodes = map[string]bool{
	"ZONE_RESOURCE_POOL_EXHAUSTED":              true,
	"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": true,
	"RESOURCE_POOL_EXHAUSTED":                   true,
	"QUOTA_EXCEEDED":                            true,
	"UNSUPPORTED_OPERATION":                     true,
}

// classify classifies a Compute error outside launches: 404 wraps
// ErrNotFound; 429, 5xx and network errors are transient; 401, 403 and
// other client errors need the user (stalled).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *auth.Error
	if errors.As(err, &ae) {
		// The token exchange failed: a refused key needs the user, an
		// unavailable token endpoint does not.
		if ae.Response != nil && ae.Response.StatusCode >= 500 {
			return backends.Transient(err)
		}
		return backends.Stalled(err)
	}
	code, reason := apiError(err)
	switch {
	case code == 0:
		return backends.Transient(err)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case code == http.StatusTooManyRequests || code >= 500 || throttledReasons[reason]:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// classifyInsert classifies a synchronous instances.insert error as dstack
// does (src/dstack/_internal/core/backends/gcp/compute.py, create_instance):
// 404 (a zone without the machine type), quota errors and 400 "Network
// profile only allows resource creation in location" mean the next zone;
// the rest as classify. A 503 is transient unless it is a stockout.
func classifyInsert(err error) error {
	if err == nil {
		return nil
	}
	code, reason := apiError(err)
	msg := err.Error()
	switch {
	case code == http.StatusNotFound, quotaReasons[reason],
		code == http.StatusBadRequest && strings.Contains(msg, "Network profile only allows resource creation in location"),
		strings.Contains(msg, "ZONE_RESOURCE_POOL_EXHAUSTED"):
		return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
	}
	return classify(err)
}

// classifyOperation classifies the error a finished operation reports:
// capacity codes and HTTP 503 or 404 (dstack's next-zone cases) wrap
// ErrNoCapacity; 429 and other 5xx are transient; the rest is stalled.
func classifyOperation(code int32, errs []opError, err error) error {
	for _, e := range errs {
		if capacityCodes[e.code] {
			return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
		}
	}
	switch {
	case code == http.StatusServiceUnavailable || code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
	case code == http.StatusTooManyRequests || code >= 500:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// An opError is one error of a finished operation.
type opError struct{ code, message string }

func isDone(err error) bool { return errors.Is(err, iterator.Done) }
