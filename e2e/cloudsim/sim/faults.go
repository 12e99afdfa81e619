package sim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// A Fault is the kind of failure injected into one API call.
type Fault string

// Fault kinds. Each provider answers them in its own wire format.
const (
	// FaultNone: the call is served.
	FaultNone Fault = ""
	// FaultTransient is a server error (EC2 InternalError or Unavailable,
	// GCE 503, ARM 500): nothing was done.
	FaultTransient Fault = "transient"
	// FaultThrottle is throttling (EC2 RequestLimitExceeded, GCE 429
	// rateLimitExceeded, ARM 429 with Retry-After): nothing was done.
	FaultThrottle Fault = "throttle"
	// FaultCapacity is the provider's capacity error (EC2
	// InsufficientInstanceCapacity, ...). Only calls that create an
	// instance get it.
	FaultCapacity Fault = "capacity"
	// FaultTimeout holds the connection (Faults.HoldMS, or until the client
	// gives up) and closes it without an answer; nothing was done.
	FaultTimeout Fault = "timeout"
	// FaultLost carries the call out, then holds the connection and closes
	// it without an answer, as a reply lost on the way: a client that
	// retries a create without an idempotency token makes a second one.
	FaultLost Fault = "lost"
)

// faultKinds are the kinds Faults.ErrorKinds may weigh, in draw order.
var faultKinds = []Fault{FaultTransient, FaultThrottle, FaultCapacity, FaultTimeout, FaultLost}

// defaultHold is how long a timeout or lost call holds its connection when
// Faults.HoldMS is 0.
const defaultHold = 3 * time.Second

// Faults are the failures the simulator injects; POST /_sim/faults sets
// them, replacing the previous ones as a whole ({} clears every fault).
type Faults struct {
	// ErrorRate is the probability (0 to 1) that an API call fails (Call,
	// Inject), with a kind drawn by ErrorKinds.
	ErrorRate float64 `json:"error_rate"`
	// ErrorKinds weighs the kinds of the failures ErrorRate injects
	// (transient, throttle, capacity, timeout, lost), e.g. {"throttle": 2,
	// "lost": 1}. Empty means throttle only. Capacity only falls on calls
	// that create an instance; other calls draw among the rest (and are not
	// failed when capacity is the only kind).
	ErrorKinds map[Fault]float64 `json:"error_kinds,omitempty"`
	// HoldMS is how long a timeout or lost call holds the connection
	// before closing it without an answer (default 3000); a client that
	// gives up earlier ends the hold.
	HoldMS int `json:"hold_ms,omitempty"`
	// LatencyMS is added to every API call (Call), in milliseconds.
	LatencyMS int `json:"latency_ms"`
	// Capacity limits instance types: how many more instances of each type
	// may be created (Take); a type absent from the map is unlimited. It
	// counts down as instances are created, and GET /_sim/faults shows what
	// is left.
	Capacity map[string]int `json:"capacity,omitempty"`
	// Stuck makes VMs never boot: how many of the next instances of each
	// type Boot leaves pending without an sshd (as a VM whose image does
	// not come up), counted down like Capacity.
	Stuck map[string]int `json:"stuck,omitempty"`
}

// Validate says what is wrong with f, naming the field.
func (f Faults) Validate() error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		return fmt.Errorf("error_rate: %v is not in [0, 1]", f.ErrorRate)
	}
	if f.LatencyMS < 0 || f.HoldMS < 0 {
		return fmt.Errorf("latency_ms and hold_ms must be >= 0")
	}
	for k, w := range f.ErrorKinds {
		if !slices.Contains(faultKinds, k) {
			return fmt.Errorf("error_kinds: unknown kind %q (have %v)", k, faultKinds)
		}
		if w < 0 {
			return fmt.Errorf("error_kinds.%s: weight %v is negative", k, w)
		}
	}
	return nil
}

// Stats counts API calls (Call) by provider and operation, and those the
// simulator failed on purpose, by operation and by fault kind.
type Stats struct {
	Calls  map[string]map[string]int `json:"calls"`
	Failed map[string]map[string]int `json:"failed"`
	// FailedByKind counts the failed calls by provider and Fault.
	FailedByKind map[string]map[string]int `json:"failed_by_kind"`
}

func newStats() Stats {
	return Stats{Calls: map[string]map[string]int{}, Failed: map[string]map[string]int{}, FailedByKind: map[string]map[string]int{}}
}

// SetFaults replaces the injected faults.
func (s *Sim) SetFaults(f Faults) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f.Capacity, f.Stuck, f.ErrorKinds = maps.Clone(f.Capacity), maps.Clone(f.Stuck), maps.Clone(f.ErrorKinds)
	s.faults = f
}

// Faults returns the injected faults, with the capacity left.
func (s *Sim) Faults() Faults {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.faults
	f.Capacity, f.Stuck, f.ErrorKinds = maps.Clone(f.Capacity), maps.Clone(f.Stuck), maps.Clone(f.ErrorKinds)
	return f
}

// Stats returns the API calls counted so far.
func (s *Sim) Stats() Stats {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	out := newStats()
	for p, m := range s.stats.Calls {
		out.Calls[p] = maps.Clone(m)
	}
	for p, m := range s.stats.Failed {
		out.Failed[p] = maps.Clone(m)
	}
	for p, m := range s.stats.FailedByKind {
		out.FailedByKind[p] = maps.Clone(m)
	}
	return out
}

// Call is called by a provider handler at the start of every API call
// (op is the provider's operation name). It counts the call, sleeps the
// injected latency and reports whether the call must fail with the
// provider's throttling error (error_rate; providers that answer the other
// kinds call Inject instead).
func (s *Sim) Call(provider, op string) (fail bool) {
	return s.inject(provider, op, []Fault{FaultThrottle}) != FaultNone
}

// Inject is Call for providers that answer every kind of fault: it counts
// the call, sleeps the injected latency and returns the fault the call
// must suffer (FaultNone to serve it). create says whether the call
// creates an instance (the only calls FaultCapacity falls on).
func (s *Sim) Inject(provider, op string, create bool) Fault {
	kinds := faultKinds
	if !create {
		kinds = []Fault{FaultTransient, FaultThrottle, FaultTimeout, FaultLost}
	}
	return s.inject(provider, op, kinds)
}

// inject counts the call, draws its fault among the kinds allowed (weighed
// by ErrorKinds; throttle alone when they are empty) and sleeps the
// latency.
func (s *Sim) inject(provider, op string, allowed []Fault) Fault {
	s.fmu.Lock()
	count(s.stats.Calls, provider, op)
	latency := time.Duration(s.faults.LatencyMS) * time.Millisecond
	f := FaultNone
	if s.faults.ErrorRate > 0 && s.rng.Float64() < s.faults.ErrorRate {
		f = s.drawLocked(allowed)
	}
	if f != FaultNone {
		count(s.stats.Failed, provider, op)
		count(s.stats.FailedByKind, provider, string(f))
	}
	s.fmu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	return f
}

// drawLocked picks a kind among allowed by the ErrorKinds weights; s.fmu
// is held.
func (s *Sim) drawLocked(allowed []Fault) Fault {
	weights := s.faults.ErrorKinds
	if len(weights) == 0 {
		weights = map[Fault]float64{FaultThrottle: 1}
	}
	var total float64
	for _, k := range allowed {
		total += weights[k]
	}
	if total <= 0 {
		return FaultNone
	}
	x := s.rng.Float64() * total
	for _, k := range allowed {
		if x < weights[k] {
			return k
		}
		x -= weights[k]
	}
	return allowed[len(allowed)-1]
}

// Hold answers a timeout or lost call: it keeps the connection of r open
// for Faults.HoldMS (or until the client gives up) and then closes it
// without an answer. It does not return (it panics with
// http.ErrAbortHandler, which net/http takes as "close the connection").
func (s *Sim) Hold(r *http.Request) {
	s.fmu.Lock()
	hold := time.Duration(s.faults.HoldMS) * time.Millisecond
	s.fmu.Unlock()
	if hold <= 0 {
		hold = defaultHold
	}
	t := time.NewTimer(hold)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	panic(http.ErrAbortHandler)
}

func count(m map[string]map[string]int, provider, op string) {
	if m[provider] == nil {
		m[provider] = map[string]int{}
	}
	m[provider][op]++
}

// Take reserves capacity for one instance of instanceType; false means the
// provider must answer with its capacity error.
func (s *Sim) Take(instanceType string) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	n, limited := s.faults.Capacity[instanceType]
	if !limited {
		return true
	}
	if n <= 0 {
		return false
	}
	s.faults.Capacity[instanceType] = n - 1
	return true
}

// stuck says whether the VM of a new instance of instanceType must never
// boot (Faults.Stuck), counting it.
func (s *Sim) stuck(instanceType string) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if n := s.faults.Stuck[instanceType]; n > 0 {
		s.faults.Stuck[instanceType] = n - 1
		return true
	}
	return false
}
