package backends_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"hoist/backends"
)

func TestKindOf_classifiesWrappedErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want backends.Kind
	}{
		{"nil has no kind", nil, ""},
		{"plain error is transient", errors.New("boom"), backends.KindTransient},
		{"stalled survives wrapping", fmt.Errorf("host a: %w", backends.Stalled(backends.ErrHostKeyMismatch)), backends.KindStalled},
		{"wait survives wrapping", fmt.Errorf("x: %w", backends.Wait(backends.ErrNotYetTerminated, time.Second)), backends.KindWait},
		{"outermost kind wins", backends.Stalled(backends.Transient(errors.New("x"))), backends.KindStalled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backends.KindOf(tt.err); got != tt.want {
				t.Errorf("KindOf = %q, want %q", got, tt.want)
			}
		})
	}
	err := fmt.Errorf("terminate: %w", backends.Wait(backends.ErrNotYetTerminated, 30*time.Second))
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.RetryAfter(err) != 30*time.Second {
		t.Errorf("wait error lost its sentinel or delay: %v", err)
	}
}

func TestReason_namesTheSentinelElseTheKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil has no reason", nil, ""},
		{"no capacity wrapped", fmt.Errorf("launch: %w: %w", backends.ErrNoCapacity, errors.New("InsufficientInstanceCapacity")), "no_capacity"},
		{"unreachable marked transient", backends.Transient(fmt.Errorf("dial: %w", backends.ErrUnreachable)), "unreachable"},
		{"plain error is transient", errors.New("RequestLimitExceeded"), "transient"},
		{"stalled without a sentinel", backends.Stalled(errors.New("AuthFailure")), "stalled"},
		{"wait for termination", backends.Wait(backends.ErrNotYetTerminated, time.Second), "not_yet_terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backends.Reason(tt.err); got != tt.want {
				t.Errorf("Reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMatchTags(t *testing.T) {
	have := map[string]string{backends.TagProject: "p", backends.TagInstance: "i1"}
	for _, tt := range []struct {
		want map[string]string
		ok   bool
	}{
		{nil, true},
		{map[string]string{backends.TagProject: "p"}, true},
		{map[string]string{backends.TagProject: "q"}, false},
		{map[string]string{backends.TagResource: ""}, false},
	} {
		if got := backends.MatchTags(have, tt.want); got != tt.ok {
			t.Errorf("MatchTags(%v) = %v, want %v", tt.want, got, tt.ok)
		}
	}
}

type nopBackend struct{ backends.Backend }

func TestRegistry_Open(t *testing.T) {
	type opts struct {
		Size int `json:"size"`
	}
	var got opts
	reg := backends.Registry{"nop": {Open: func(cfg backends.Config, _ backends.Deps) (backends.Backend, error) {
		if err := cfg.Decode(&got); err != nil {
			return nil, err
		}
		return nopBackend{}, nil
	}}}
	if _, err := reg.Open(backends.Config{Type: "nop", Options: json.RawMessage(`{"size": 3}`)}, backends.Deps{}); err != nil || got.Size != 3 {
		t.Fatalf("Open = %v, options %+v", err, got)
	}
	_, err := reg.Open(backends.Config{Name: "x", Type: "nop", Options: json.RawMessage(`{"sise": 3}`)}, backends.Deps{})
	if err == nil || !strings.Contains(err.Error(), `"sise"`) {
		t.Errorf("unknown option accepted or not named: %v", err)
	}
	_, err = reg.Open(backends.Config{Type: "aws"}, backends.Deps{})
	if err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Errorf("unknown type: %v", err)
	}
}
