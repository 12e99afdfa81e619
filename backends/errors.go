package backends

import (
	"errors"
	"time"
)

// Sentinel errors. Drivers wrap them (usually inside an *Error carrying a
// Kind) and callers test with errors.Is.
var (
	// ErrNotFound means the instance (or volume, gateway, ...) does not
	// exist: never created, or already gone.
	ErrNotFound = errors.New("not found")
	// ErrNotYetTerminated means termination is under way; call Terminate
	// again later (dstack's NotYetTerminated).
	ErrNotYetTerminated = errors.New("not yet terminated")
	// ErrNoCapacity means the offer cannot be provisioned now; try another
	// offer or retry later.
	ErrNoCapacity = errors.New("no capacity")
	// ErrUnreachable means the instance or host could not be reached (dial,
	// handshake or agent timeout); back off and retry.
	ErrUnreachable = errors.New("unreachable")
	// ErrHostKeyMismatch means a host presented an SSH host key other than
	// the pinned one. It is never retried or re-trusted automatically.
	ErrHostKeyMismatch = errors.New("ssh host key mismatch")
	// ErrUnsupportedHost means a host fails the checks (not Linux, no
	// Docker, unknown architecture) and needs the user to fix it.
	ErrUnsupportedHost = errors.New("unsupported host")
	// ErrUnsupported means the backend does not offer the operation.
	ErrUnsupported = errors.New("unsupported")
)

// A Kind tells a caller what to do about an error.
type Kind string

// Error kinds.
const (
	// KindTransient errors are retried with back-off. An unclassified error
	// is treated as transient.
	KindTransient Kind = "transient"
	// KindWait errors are expected: retry after Error.After (e.g. an
	// instance still terminating).
	KindWait Kind = "wait"
	// KindStalled errors need the user (bad credentials, changed host key,
	// unsupported host); retrying without a change is pointless.
	KindStalled Kind = "stalled"
)

// An Error classifies a driver error with a Kind.
type Error struct {
	// Kind says how the caller should react.
	Kind Kind
	// After is the suggested delay before the next attempt (KindWait,
	// KindTransient); zero lets the caller choose.
	After time.Duration
	// Err is the underlying error.
	Err error
}

// Error returns the underlying error's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Transient marks err as transient (retry with back-off). It returns nil for
// nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindTransient, Err: err}
}

// Wait marks err as an expected wait, to be retried after the given delay. It
// returns nil for nil.
func Wait(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindWait, After: after, Err: err}
}

// Stalled marks err as needing the user. It returns nil for nil.
func Stalled(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindStalled, Err: err}
}

// KindOf returns the kind of err: the Kind of the outermost *Error in its
// chain, KindTransient for any other non-nil error, and "" for nil.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindTransient
}

// IsStalled reports whether err needs the user.
func IsStalled(err error) bool { return KindOf(err) == KindStalled }

// RetryAfter returns the delay an *Error in err's chain suggests, or zero.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.After
	}
	return 0
}

// Reason names the class of a backend error for metrics and logs:
// no_capacity, not_found, not_yet_terminated, unreachable,
// host_key_mismatch, unsupported_host or unsupported when err wraps that
// sentinel, else its Kind (transient, wait, stalled); "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range []struct {
		err  error
		name string
	}{
		{ErrNoCapacity, "no_capacity"}, {ErrNotFound, "not_found"}, {ErrNotYetTerminated, "not_yet_terminated"},
		{ErrUnreachable, "unreachable"}, {ErrHostKeyMismatch, "host_key_mismatch"},
		{ErrUnsupportedHost, "unsupported_host"}, {ErrUnsupported, "unsupported"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return string(KindOf(err))
}
