package schema

import "sync"

// DropCachedValidators forgets the compiled schemas so the next load
// starts cold.
func DropCachedValidators() {
	validators = sync.Pool{New: func() any { return newValidator() }}
}

// DropFieldCache forgets memoized schema verdicts so the next load
// evaluates every field value with CUE.
func DropFieldCache() {
	fieldCache.Lock()
	fieldCache.m = nil
	fieldCache.Unlock()
}
