package schema

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// envStringRE matches an env list item, "NAME=value" or "NAME".
var envStringRE = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(=.*\n?$|\n?$)`)

// dec decodes node trees into normalized Go values, collecting errors.
type dec struct {
	errs Errors
}

func (d *dec) errf(n *node, path, format string, args ...any) {
	d.errs = append(d.errs, newError(n.pos, path, format, args...))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func idx(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// object checks that n is a mapping whose keys are all in allowed,
// reporting unknown keys with a did-you-mean suggestion.
func (d *dec) object(n *node, path string, allowed ...string) bool {
	if n.kind != nMap {
		d.errf(n, path, "expected a mapping, got %s", n.describe())
		return false
	}
	ok := true
	for _, k := range n.keys {
		if !contains(allowed, k.str) {
			d.errs = append(d.errs, unknownField(k, path, k.str, allowed))
			ok = false
		}
	}
	return ok
}

func unknownField(k *node, path, key string, allowed []string) *Error {
	msg := fmt.Sprintf("field %q not allowed", key)
	if s := suggest(key, allowed); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return newError(k.pos, join(path, key), "%s", msg)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns the closest allowed name to key, or "".
func suggest(key string, allowed []string) string {
	best, bestD := "", math.MaxInt
	for _, a := range allowed {
		dd := levenshtein(strings.ToLower(key), a)
		if dd < bestD || (dd == bestD && a < best) {
			best, bestD = a, dd
		}
	}
	limit := 2
	if len(key) > 8 {
		limit = 3
	}
	if bestD <= limit || (best != "" && (strings.HasPrefix(best, key) || strings.HasPrefix(key, best)) && len(key) >= 3) {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := 1
			if ra[i-1] == rb[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
			// transposition
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev[j-1]) // approximate OSA via prev row
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// str decodes a string; numbers are coerced to their text like pydantic's
// coerce_numbers_to_str.
func (d *dec) str(n *node, path string) (string, bool) {
	switch n.kind {
	case nString:
		return n.str, true
	case nInt, nFloat:
		return n.scalarText(), true
	}
	d.errf(n, path, "expected a string, got %s", n.describe())
	return "", false
}

// optStr decodes an optional string: absent or null gives "".
func (d *dec) optStr(n *node, path string) string {
	if n.isNull() {
		return ""
	}
	s, _ := d.str(n, path)
	return s
}

func (d *dec) boolean(n *node, path string) (bool, bool) {
	if n.kind == nBool {
		return n.b, true
	}
	if n.kind == nInt && (n.i == 0 || n.i == 1) {
		return n.i == 1, true
	}
	if n.kind == nFloat && (n.f == 0 || n.f == 1) {
		return n.f == 1, true
	}
	if n.kind == nString {
		switch strings.ToLower(n.str) {
		case "true", "yes", "on", "1", "t", "y":
			return true, true
		case "false", "no", "off", "0", "f", "n":
			return false, true
		}
	}
	d.errf(n, path, "expected a boolean, got %s", n.describe())
	return false, false
}

func (d *dec) optBool(n *node, path string, def bool) bool {
	if n.isNull() {
		return def
	}
	b, _ := d.boolean(n, path)
	return b
}

// integer decodes a whole number (ints, integral floats, digit strings).
func (d *dec) integer(n *node, path string) (int64, bool) {
	switch n.kind {
	case nInt:
		return n.i, true
	case nBool: // pydantic's lax mode reads true as 1
		if n.b {
			return 1, true
		}
		return 0, true
	case nFloat:
		if n.f == math.Trunc(n.f) && !math.IsInf(n.f, 0) && math.Abs(n.f) < 1e18 {
			return int64(n.f), true
		}
		d.errf(n, path, "expected an integer, got %s", pyFloat(n.f))
		return 0, false
	case nString:
		if v, err := parseInt(n.str); err == nil {
			return v, true
		}
	}
	d.errf(n, path, "expected an integer, got %s", n.describe())
	return 0, false
}

func (d *dec) number(n *node, path string) (float64, bool) {
	switch n.kind {
	case nInt:
		return float64(n.i), true
	case nBool: // pydantic's lax mode reads true as 1.0
		if n.b {
			return 1, true
		}
		return 0, true
	case nFloat:
		if math.IsNaN(n.f) || math.IsInf(n.f, 0) {
			d.errf(n, path, "expected a finite number")
			return 0, false
		}
		return n.f, true
	case nString:
		if v, err := parsePyFloat(n.str); err == nil {
			return v, true
		}
	}
	d.errf(n, path, "expected a number, got %s", n.describe())
	return 0, false
}

func (d *dec) strList(n *node, path string) []string {
	if n.isNull() {
		return nil
	}
	if n.kind != nList {
		d.errf(n, path, "expected a list, got %s", n.describe())
		return nil
	}
	out := make([]string, 0, len(n.items))
	for i, it := range n.items {
		if s, ok := d.str(it, idx(path, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *dec) enum(n *node, path string, values ...string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	if !contains(values, s) {
		d.errf(n, path, "invalid value %q: must be one of %s", s, quoteList(values))
		return "", false
	}
	return s, true
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// duration decodes a plain duration in seconds.
func (d *dec) duration(n *node, path string) (int64, bool) {
	switch n.kind {
	case nInt:
		return n.i, true
	case nBool: // dstack's Duration.parse treats a bool as a number
		if n.b {
			return 1, true
		}
		return 0, true
	case nFloat:
		return int64(n.f), true
	case nString:
		v, err := ParseDuration(n.str)
		if err != nil {
			d.errf(n, path, "%v", err)
			return 0, false
		}
		return v, true
	}
	d.errf(n, path, "expected a duration, got %s", n.describe())
	return 0, false
}

// offDuration decodes max_duration/stop_duration: off/false → Off,
// true/absent → def, negatives rejected.
func (d *dec) offDuration(n *node, path string, def int64) int64 {
	if n.isNull() || (n.kind == nBool && n.b) {
		return def
	}
	if (n.kind == nBool && !n.b) || (n.kind == nString && n.str == "off") {
		return Off
	}
	v, ok := d.duration(n, path)
	if !ok {
		return def
	}
	if v < 0 {
		d.errf(n, path, "duration cannot be negative")
		return def
	}
	return v
}

// idleDuration decodes idle_duration/auto_cleanup_duration: off/false/-1 →
// Off, true/absent → def; other negatives are kept (dstack legacy).
func (d *dec) idleDuration(n *node, path string, def int64) int64 {
	if n.isNull() || (n.kind == nBool && n.b) {
		return def
	}
	if (n.kind == nBool && !n.b) || (n.kind == nString && n.str == "off") || (n.kind == nInt && n.i == -1) {
		return Off
	}
	v, ok := d.duration(n, path)
	if !ok {
		return def
	}
	if v < 0 {
		return Off
	}
	return v
}

// intRange decodes a Range of whole numbers: int, "a..b" or {min, max}.
func (d *dec) intRange(n *node, path string) (Range, bool) {
	return d.rangeOf(n, path, false)
}

func (d *dec) memRange(n *node, path string) (Range, bool) {
	return d.rangeOf(n, path, true)
}

func (d *dec) rangeOf(n *node, path string, mem bool) (Range, bool) {
	scalar := func(x *node) (*float64, bool) {
		if x.isNull() {
			return nil, true
		}
		if mem {
			v, ok := d.memory(x, path)
			return f64(v), ok
		}
		v, ok := d.integer(x, path)
		return f64(float64(v)), ok
	}
	var r Range
	switch n.kind {
	case nMap:
		if !d.object(n, path, fieldsAt("#IntRange")...) {
			return Range{}, false
		}
		var ok1, ok2 bool
		r.Min, ok1 = scalar(n.get("min"))
		r.Max, ok2 = scalar(n.get("max"))
		if !ok1 || !ok2 {
			return Range{}, false
		}
	case nString:
		var err error
		if mem {
			r, err = ParseMemoryRange(n.str)
		} else {
			r, err = ParseRange(n.str)
		}
		if err != nil {
			d.errf(n, path, "%v", err)
			return Range{}, false
		}
		return r, true
	case nInt, nFloat, nBool:
		v, ok := scalar(n)
		if !ok {
			return Range{}, false
		}
		r.Min, r.Max = v, f64(*v)
	default:
		d.errf(n, path, "expected a range, got %s", n.describe())
		return Range{}, false
	}
	if err := checkRange(r); err != nil {
		d.errf(n, path, "%v", err)
		return Range{}, false
	}
	return r, true
}

func (d *dec) memory(n *node, path string) (float64, bool) {
	switch n.kind {
	case nInt:
		return float64(n.i), true
	case nBool: // dstack's Memory.parse treats a bool as a number
		if n.b {
			return 1, true
		}
		return 0, true
	case nFloat:
		return n.f, true
	case nString:
		v, err := ParseMemory(n.str)
		if err != nil {
			d.errf(n, path, "%v", err)
			return 0, false
		}
		return v, true
	}
	d.errf(n, path, "expected a memory size, got %s", n.describe())
	return 0, false
}

// env decodes an env mapping or list into a sorted list of variables.
func (d *dec) env(n *node, path string) []EnvVar {
	if n.isNull() {
		return nil
	}
	var out []EnvVar
	seen := map[string]bool{}
	switch n.kind {
	case nMap:
		for i, k := range n.keys {
			v := n.vals[i]
			p := join(path, k.str)
			if v.kind == nMap && len(v.keys) == 1 && v.keys[0].str == "key" {
				if s, ok := d.str(v.vals[0], join(p, "key")); ok {
					_ = s
					out = append(out, EnvVar{Name: k.str, FromLocal: true})
				}
				continue
			}
			if v.kind != nString && v.kind != nInt && v.kind != nFloat {
				d.errf(v, p, "expected a string, got %s", v.describe())
				continue
			}
			s := v.scalarText()
			out = append(out, EnvVar{Name: k.str, Value: s, Secrets: SecretRefs(s)})
		}
	case nList:
		for i, it := range n.items {
			p := idx(path, i)
			s, ok := d.str(it, p)
			if !ok {
				continue
			}
			m := envStringRE.FindStringSubmatch(s)
			if m == nil {
				d.errf(it, p, "invalid environment variable %q: must be NAME=VALUE or NAME", s)
				continue
			}
			name := m[1]
			if seen[name] {
				d.errf(it, p, "duplicate environment variable: %s", s)
				continue
			}
			seen[name] = true
			if eq := strings.IndexByte(s, '='); eq >= 0 {
				val := s[eq+1:]
				out = append(out, EnvVar{Name: name, Value: val, Secrets: SecretRefs(val)})
			} else {
				out = append(out, EnvVar{Name: name, FromLocal: true})
			}
		}
	default:
		d.errf(n, path, "expected a mapping or a list, got %s", n.describe())
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
