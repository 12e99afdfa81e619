package schema

import "sync"

// DropCachedValidators forgets the compiled schemas so the next load
// starts cold.
func DropCachedValidators() {
	validators = sync.Pool{New: func() any { return newValidator() }}
}
