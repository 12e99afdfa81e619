package azure

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"hoist/backends"
)

// capacityCodes are the error codes that mean "not now, not here": dstack
// maps SkuNotAvailable and OperationNotAllowed (quota) at the create, and
// AllocationFailed and OverconstrainedAllocationRequest in the poll, to
// NoCapacityError (src/dstack/_internal/core/backends/azure/compute.py);
// ZonalAllocationFailed is the zonal AllocationFailed
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure).
var capacityCodes = map[string]bool{
	"SkuNotAvailable":                       true,
	"OperationNotAllowed":                   true,
	"AllocationFailed":                      true,
	"ZonalAllocationFailed":                 true,
	"OverconstrainedAllocationRequest":      true,
	"OverconstrainedZonalAllocationRequest": true,
}

// stalledCodes are errors of the configuration whatever their status: a
// subscription that does not exist or is disabled, a resource provider not
// registered for it.
var stalledCodes = map[string]bool{
	"SubscriptionNotFound":            true,
	"InvalidSubscriptionId":           true,
	"ReadOnlyDisabledSubscription":    true,
	"MissingSubscriptionRegistration": true,
}

// notFoundCodes are the codes of a resource that does not exist.
var notFoundCodes = map[string]bool{"ResourceNotFound": true, "NotFound": true, "ResourceGroupNotFound": true}

// classify wraps an SDK error of op with what the caller should do
// (capacity codes are Launch's to judge): missing resources
// backends.ErrNotFound; throttling (429), timeouts and server errors are
// transient (after the response's Retry-After); rejected credentials
// (401, 403, a failed token request) and bad requests (400) are stalled;
// other conflicts (another operation in progress) are transient. Anything
// else (network errors) is left unclassified, which callers treat as
// transient.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("azure: %s: %w", op, err)
	var auth *azidentity.AuthenticationFailedError
	if errors.As(err, &auth) {
		if auth.RawResponse != nil && auth.RawResponse.StatusCode >= 500 {
			return backends.Transient(err)
		}
		return backends.Stalled(err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case stalledCodes[re.ErrorCode]:
		return backends.Stalled(err)
	case re.StatusCode == http.StatusNotFound || notFoundCodes[re.ErrorCode]:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case re.StatusCode == http.StatusTooManyRequests, re.StatusCode == http.StatusRequestTimeout,
		re.StatusCode >= 500, re.StatusCode == http.StatusConflict:
		return &backends.Error{Kind: backends.KindTransient, After: retryAfter(re.RawResponse), Err: err}
	case re.StatusCode == http.StatusUnauthorized, re.StatusCode == http.StatusForbidden, re.StatusCode == http.StatusBadRequest:
		return backends.Stalled(err)
	}
	return err
}

// retryAfter reads a response's Retry-After (seconds); zero when absent.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}
