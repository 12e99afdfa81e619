package schema

import "fmt"

// The size limits of a revision. They are checked before any CUE
// evaluation, so that validation time and memory stay proportional to what
// is accepted, and they fit the limits further down: a resource hoist
// accepts (at most MaxResourceBytes of canonical JSON) always fits the
// runner's job-spec body limit (agents/api.MaxJobSpecBytes), which the
// reconciler's tests check.
const (
	// MaxFileBytes is the largest spec file (YAML or CUE) accepted, in bytes.
	MaxFileBytes = 1 << 20
	// MaxRevisionBytes is the largest total size of the spec files of one
	// revision, in bytes.
	MaxRevisionBytes = 64 << 20
	// MaxRevisionFiles is the largest number of spec files in one revision.
	MaxRevisionFiles = 20_000
	// MaxListItems is the longest list accepted anywhere in a spec
	// (commands, env, volumes, ...), whether written out or built by CUE.
	MaxListItems = 10_000
	// MaxMapKeys is the largest number of keys of one mapping in a spec.
	MaxMapKeys = 10_000
	// MaxDepth is how deeply values of a spec may nest.
	MaxDepth = 100
	// MaxValues is the largest number of values (scalars, lists and
	// mappings) in one spec document, after YAML aliases are expanded.
	MaxValues = 1_000_000
	// MaxResourceBytes is the largest canonical JSON of one resource: what
	// is stored with its runs and sent to the agents. A CUE file within
	// MaxFileBytes can still build a larger value.
	MaxResourceBytes = 1 << 20
)

// limitError reports a value over a size limit, naming the field path and
// the limit.
func limitError(pos Position, path []string, format string, args ...any) *Error {
	return newError(pos, dottedPath(path), format, args...)
}

func listLimitError(pos Position, path []string, n int) *Error {
	return limitError(pos, path, "%d items, more than the limit of %d per list", n, MaxListItems)
}

func mapLimitError(pos Position, path []string, n int) *Error {
	return limitError(pos, path, "%d keys, more than the limit of %d per mapping", n, MaxMapKeys)
}

func depthLimitError(pos Position, path []string) *Error {
	return limitError(pos, path, "nested more than %d levels deep, the limit", MaxDepth)
}

func fileLimitError(file string, size int64) *Error {
	return &Error{Pos: Position{File: file, Line: 1, Column: 1},
		Msg: fmt.Sprintf("file is %s, more than the limit of %s per spec file", byteSize(size), byteSize(MaxFileBytes))}
}

// byteSize renders n bytes for messages: 1 MiB, 52428800 bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkSizes walks a converted document (from YAML or CUE) and reports the
// first value over MaxListItems, MaxMapKeys, MaxDepth or MaxValues, so that
// nothing larger reaches the schema check.
func checkSizes(doc *node) *Error {
	values := 0
	var path []string
	var walk func(n *node, depth int) *Error
	walk = func(n *node, depth int) *Error {
		if depth > MaxDepth {
			return depthLimitError(n.pos, path)
		}
		if values++; values > MaxValues {
			return limitError(n.pos, path, "document holds more than %d values, the limit", MaxValues)
		}
		switch n.kind {
		case nList:
			if len(n.items) > MaxListItems {
				return listLimitError(n.pos, path, len(n.items))
			}
			for i, it := range n.items {
				path = append(path, fmt.Sprint(i))
				if e := walk(it, depth+1); e != nil {
					return e
				}
				path = path[:len(path)-1]
			}
		case nMap:
			if len(n.keys) > MaxMapKeys {
				return mapLimitError(n.pos, path, len(n.keys))
			}
			for i, k := range n.keys {
				path = append(path, k.str)
				if e := walk(n.vals[i], depth+1); e != nil {
					return e
				}
				path = path[:len(path)-1]
			}
		case nString:
			if len(n.str) > MaxResourceBytes {
				return limitError(n.pos, path, "string of %s, more than the limit of %s", byteSize(int64(len(n.str))), byteSize(MaxResourceBytes))
			}
		}
		return nil
	}
	return walk(doc, 1)
}
