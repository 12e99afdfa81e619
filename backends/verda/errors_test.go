package verda

import (
	"errors"
	"testing"

	"hoist/backends"
)

func TestClassify(t *testing.T) {
	netErr := errors.New("connection refused")
	for _, c := range []struct {
		name           string
		err            error
		kind, launched backends.Kind
		capacity       bool // launch error wraps ErrNoCapacity
	}{
		{"unauthorized", &APIError{Status: 401, Code: "unauthorized_request"}, backends.KindStalled, backends.KindStalled, false},
		{"insufficient funds", &APIError{Status: 402, Code: "insufficient_funds"}, backends.KindStalled, backends.KindStalled, false},
		{"forbidden", &APIError{Status: 403, Code: "forbidden_action"}, backends.KindStalled, backends.KindStalled, false},
		{"rate limit", &APIError{Status: 429, Code: "too_many_requests"}, backends.KindTransient, backends.KindTransient, false},
		{"no capacity", &APIError{Status: 503, Code: "service_unavailable", Message: "No capacity available"}, backends.KindTransient, backends.KindTransient, true},
		{"bad request", &APIError{Status: 400, Code: "invalid_request"}, backends.KindStalled, backends.KindStalled, true},
		{"server error", &APIError{Status: 500, Code: "server_error"}, backends.KindTransient, backends.KindTransient, false},
		{"network", netErr, backends.KindTransient, backends.KindTransient, false},
	} {
		if got := backends.KindOf(classify(c.err)); got != c.kind {
			t.Errorf("%s: classify kind %v, want %v", c.name, got, c.kind)
		}
		err := classifyLaunch(c.err)
		if errors.Is(err, backends.ErrNoCapacity) != c.capacity {
			t.Errorf("%s: classifyLaunch = %v, no capacity want %v", c.name, err, c.capacity)
		}
		if !c.capacity && backends.KindOf(err) != c.launched {
			t.Errorf("%s: classifyLaunch kind %v, want %v", c.name, backends.KindOf(err), c.launched)
		}
	}
	if !errors.Is(classify(&APIError{Status: 404, Code: "not_found"}), backends.ErrNotFound) {
		t.Error("404 is not ErrNotFound")
	}
	if !isProvisioning(&APIError{Status: 400, Message: "Can't discontinue a provisioning instance"}) {
		t.Error("a provisioning instance's refusal is not recognized")
	}
	for _, msg := range []string{"Invalid instance id", "Can't discontinue a discontinued instance"} {
		if !isGone(&APIError{Status: 400, Message: msg}) {
			t.Errorf("%q is not recognized as gone", msg)
		}
	}
}

func TestClassifyVolume(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		kind     backends.Kind
		capacity bool
	}{
		{"no capacity", &APIError{Status: 503, Code: "service_unavailable", Message: "No capacity available"}, backends.KindTransient, true},
		{"quota", &APIError{Status: 400, Code: "invalid_request", Message: "Volume quota exceeded"}, backends.KindStalled, true},
		{"bad location", &APIError{Status: 400, Code: "invalid_request", Message: "Invalid location code"}, backends.KindStalled, false},
		{"unauthorized", &APIError{Status: 401, Code: "unauthorized_request", Message: "Invalid or expired access token"}, backends.KindStalled, false},
		{"insufficient funds", &APIError{Status: 402, Code: "insufficient_funds"}, backends.KindStalled, false},
		{"rate limit", &APIError{Status: 429, Code: "too_many_requests", Message: "Rate limit exceeded"}, backends.KindTransient, false},
		{"server error", &APIError{Status: 500, Code: "server_error"}, backends.KindTransient, false},
	} {
		err := classifyVolume(c.err)
		if errors.Is(err, backends.ErrNoCapacity) != c.capacity {
			t.Errorf("%s: classifyVolume = %v, no capacity want %v", c.name, err, c.capacity)
		}
		if !c.capacity && backends.KindOf(err) != c.kind {
			t.Errorf("%s: classifyVolume kind %v, want %v", c.name, backends.KindOf(err), c.kind)
		}
	}
	for _, err := range []error{&APIError{Status: 404, Code: "not_found"}, &APIError{Status: 400, Message: "Invalid volume id"}} {
		if !isVolumeGone(err) {
			t.Errorf("%v is not recognized as a volume gone", err)
		}
	}
}
