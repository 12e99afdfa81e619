package schema

import "sync"

// The two functions below make the next load start as a new process's
// first does; benchmarks of a cold load (this package's and the
// reconciler's) call them.

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

// DropFileCache forgets the verdicts kept per YAML spec file, so the next
// load validates every file again.
func DropFileCache() {
	fileCache.Lock()
	clear(fileCache.m)
	fileCache.Unlock()
}
