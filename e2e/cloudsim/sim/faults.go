package sim

import (
	"maps"
	"time"
)

// Faults are the failures the simulator injects; POST /_sim/faults sets
// them, replacing the previous ones as a whole ({} clears every fault).
type Faults struct {
	// ErrorRate is the probability (0 to 1) that an API call fails with the
	// provider's throttling or transient error (Call).
	ErrorRate float64 `json:"error_rate"`
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

// Stats counts API calls (Call) by provider and operation, and those the
// simulator failed on purpose.
type Stats struct {
	Calls  map[string]map[string]int `json:"calls"`
	Failed map[string]map[string]int `json:"failed"`
}

func newStats() Stats {
	return Stats{Calls: map[string]map[string]int{}, Failed: map[string]map[string]int{}}
}

// SetFaults replaces the injected faults.
func (s *Sim) SetFaults(f Faults) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f.Capacity, f.Stuck = maps.Clone(f.Capacity), maps.Clone(f.Stuck)
	s.faults = f
}

// Faults returns the injected faults, with the capacity left.
func (s *Sim) Faults() Faults {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.faults
	f.Capacity, f.Stuck = maps.Clone(f.Capacity), maps.Clone(f.Stuck)
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
	return out
}

// Call is called by a provider handler at the start of every API call
// (op is the provider's operation name). It counts the call, sleeps the
// injected latency and reports whether the call must fail with the
// provider's throttling or transient error (error_rate).
func (s *Sim) Call(provider, op string) (fail bool) {
	s.fmu.Lock()
	count(s.stats.Calls, provider, op)
	latency := time.Duration(s.faults.LatencyMS) * time.Millisecond
	fail = s.faults.ErrorRate > 0 && s.rng.Float64() < s.faults.ErrorRate
	if fail {
		count(s.stats.Failed, provider, op)
	}
	s.fmu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	return fail
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
