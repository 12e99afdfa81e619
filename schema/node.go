package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// kind of a node value.
type nkind int

const (
	nNull nkind = iota
	nBool
	nInt
	nFloat
	nString
	nMap
	nList
)

func (k nkind) String() string {
	return [...]string{"null", "bool", "int", "float", "string", "mapping", "list"}[k]
}

// node is a position-carrying, format-independent document tree built from
// YAML or from an evaluated CUE value.
type node struct {
	kind  nkind
	pos   Position
	str   string // nString; source text for numbers
	b     bool
	i     int64
	f     float64
	keys  []*node // nMap: key nodes (nString), in source order
	vals  []*node // nMap
	items []*node // nList
}

func (n *node) get(key string) *node {
	if n == nil || n.kind != nMap {
		return nil
	}
	for i, k := range n.keys {
		if k.str == key {
			return n.vals[i]
		}
	}
	return nil
}

func (n *node) keyNode(key string) *node {
	if n == nil || n.kind != nMap {
		return nil
	}
	for _, k := range n.keys {
		if k.str == key {
			return k
		}
	}
	return nil
}

// has reports whether key is present (even with a null value).
func (n *node) has(key string) bool { return n.keyNode(key) != nil }

// isNull reports whether n is absent or null.
func (n *node) isNull() bool { return n == nil || n.kind == nNull }

// scalarText renders a scalar node the way Python's str() would.
func (n *node) scalarText() string {
	switch n.kind {
	case nString:
		return n.str
	case nInt:
		return strconv.FormatInt(n.i, 10)
	case nFloat:
		return pyFloat(n.f)
	case nBool:
		if n.b {
			return "True"
		}
		return "False"
	case nNull:
		return "None"
	}
	return n.kind.String()
}

func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// parseYAML parses one YAML document into a node tree. Plain scalars are
// resolved with YAML 1.1 rules (as PyYAML, which dstack uses, does): `on`,
// `off`, `yes`, `no` are booleans, `1:30` is sexagesimal, `1e3` is a string.
func parseYAML(file string, src []byte) (*node, *Error) {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Pos: Position{File: file, Line: extra.Line, Column: extra.Column},
			Msg: "a spec file holds one YAML document; found another"}
	} else if err != io.EOF {
		return nil, yamlError(file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &node{kind: nNull, pos: Position{File: file, Line: 1, Column: 1}}, nil
	}
	c := converter{file: file, depth: 0}
	n, err := c.convert(doc.Content[0])
	if err != nil {
		return nil, err
	}
	return n, nil
}

// yamlError turns the YAML parser's error into a spec error at the place
// the parser reports (its Mark, as PyYAML reports it), naming where the
// construct it was parsing started; without a position, at the file's
// start.
func yamlError(file string, err error) *Error {
	pos := Position{File: file, Line: 1, Column: 1}
	msg := err.Error()
	var le *yaml.LoadError
	var les *yaml.LoadErrors
	switch {
	case errors.As(err, &le):
	case errors.As(err, &les) && len(les.Errors) > 0:
		le = les.Errors[0]
	}
	if le != nil {
		msg = le.Message
		if le.Mark.Line > 0 {
			pos.Line, pos.Column = le.Mark.Line, max(le.Mark.Column, 1)
		}
		if le.ContextMsg != "" && le.ContextMark.Line > 0 && le.ContextMark != le.Mark {
			msg += fmt.Sprintf(" (%s started at %d:%d)", le.ContextMsg, le.ContextMark.Line, max(le.ContextMark.Column, 1))
		}
	}
	return &Error{Pos: pos, Msg: "invalid YAML: " + msg}
}

type converter struct {
	file  string
	depth int
	nodes int      // budget against alias bombs ("billion laughs")
	path  []string // of the value being converted, for limit errors
}

func (c *converter) pos(y *yaml.Node) Position {
	return Position{File: c.file, Line: y.Line, Column: y.Column}
}

func (c *converter) convert(y *yaml.Node) (*node, *Error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > MaxDepth {
		return nil, depthLimitError(c.pos(y), c.path)
	}
	if c.nodes++; c.nodes > MaxValues {
		return nil, limitError(c.pos(y), c.path, "more than %d values after expanding aliases, the limit per document", MaxValues)
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return &node{kind: nNull, pos: c.pos(y)}, nil
		}
		return c.convert(y.Content[0])
	case yaml.AliasNode:
		if y.Alias == nil {
			return &node{kind: nNull, pos: c.pos(y)}, nil
		}
		n, err := c.convert(y.Alias)
		if err != nil {
			return nil, err
		}
		cp := *n
		cp.pos = c.pos(y)
		return &cp, nil
	case yaml.MappingNode:
		if len(y.Content)/2 > MaxMapKeys {
			return nil, mapLimitError(c.pos(y), c.path, len(y.Content)/2)
		}
		n := &node{kind: nMap, pos: c.pos(y)}
		seen := map[string]int{} // key → index in n.keys
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" || (k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0) {
				if err := c.merge(n, seen, v); err != nil {
					return nil, err
				}
				continue
			}
			kn, err := c.convert(k)
			if err != nil {
				return nil, err
			}
			if kn.kind == nMap || kn.kind == nList {
				return nil, &Error{Pos: c.pos(k), Msg: "mapping keys must be scalars"}
			}
			key := &node{kind: nString, pos: kn.pos, str: kn.scalarText()}
			if kn.kind == nNull {
				key.str = "None"
			}
			c.path = append(c.path, key.str)
			if v.Kind == yaml.SequenceNode && len(v.Content) > MaxListItems {
				// At the key, where the reader looks for the field.
				return nil, listLimitError(key.pos, c.path, len(v.Content))
			}
			vn, err := c.convert(v)
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return nil, err
			}
			if j, ok := seen[key.str]; ok {
				// PyYAML keeps the last value of a duplicated key.
				n.keys[j], n.vals[j] = key, vn
				continue
			}
			seen[key.str] = len(n.keys)
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, vn)
		}
		if len(n.keys) > MaxMapKeys { // merge keys add more
			return nil, mapLimitError(n.pos, c.path, len(n.keys))
		}
		return n, nil
	case yaml.SequenceNode:
		if len(y.Content) > MaxListItems {
			return nil, listLimitError(c.pos(y), c.path, len(y.Content))
		}
		n := &node{kind: nList, pos: c.pos(y)}
		for i, it := range y.Content {
			c.path = append(c.path, strconv.Itoa(i))
			in, err := c.convert(it)
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, in)
		}
		return n, nil
	case yaml.ScalarNode:
		return c.scalar(y), nil
	}
	return &node{kind: nNull, pos: c.pos(y)}, nil
}

func (c *converter) merge(n *node, seen map[string]int, v *yaml.Node) *Error {
	src, err := c.convert(v)
	if err != nil {
		return err
	}
	var maps []*node
	switch src.kind {
	case nMap:
		maps = []*node{src}
	case nList:
		maps = src.items
	default:
		return &Error{Pos: src.pos, Msg: "merge key value must be a mapping"}
	}
	for _, m := range maps {
		if m.kind != nMap {
			return &Error{Pos: m.pos, Msg: "merge key value must be a mapping"}
		}
		for i, k := range m.keys {
			if _, ok := seen[k.str]; ok {
				continue
			}
			seen[k.str] = len(n.keys)
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, m.vals[i])
		}
	}
	return nil
}

var (
	yaml11Bool    = map[string]bool{"yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true, "no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false}
	yaml11Null    = map[string]bool{"": true, "~": true, "null": true, "Null": true, "NULL": true}
	yaml11Int     = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yaml11Float   = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	sexagesimalRE = regexp.MustCompile(`:`)
)

func (c *converter) scalar(y *yaml.Node) *node {
	n := &node{pos: c.pos(y), str: y.Value}
	quoted := y.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if quoted || y.Tag == "!!str" || y.Tag == "!!binary" {
		n.kind = nString
		return n
	}
	v := y.Value
	if yaml11Null[v] || y.Tag == "!!null" {
		n.kind = nNull
		return n
	}
	if b, ok := yaml11Bool[v]; ok {
		n.kind, n.b = nBool, b
		return n
	}
	if yaml11Int.MatchString(v) {
		if i, ok := parseYAML11Int(v); ok {
			n.kind, n.i = nInt, i
			return n
		}
		// Too large for int64 (Python ints are unbounded): keep as a float.
		if f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64); err == nil {
			n.kind, n.f = nFloat, f
			return n
		}
	}
	if yaml11Float.MatchString(v) {
		if f, ok := parseYAML11Float(v); ok {
			n.kind, n.f = nFloat, f
			return n
		}
	}
	n.kind = nString
	return n
}

func parseYAML11Int(v string) (int64, bool) {
	s := strings.ReplaceAll(v, "_", "")
	sign := int64(1)
	if strings.HasPrefix(s, "-") {
		sign, s = -1, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	var x int64
	var err error
	switch {
	case s == "0":
		return 0, true
	case strings.HasPrefix(s, "0b"):
		x, err = strconv.ParseInt(s[2:], 2, 64)
	case strings.HasPrefix(s, "0x"):
		x, err = strconv.ParseInt(s[2:], 16, 64)
	case strings.HasPrefix(s, "0"):
		x, err = strconv.ParseInt(s[1:], 8, 64)
	case sexagesimalRE.MatchString(s):
		for _, part := range strings.Split(s, ":") {
			d, e := strconv.ParseInt(part, 10, 64)
			if e != nil {
				return 0, false
			}
			if x > (math.MaxInt64-d)/60 {
				return 0, false
			}
			x = x*60 + d
		}
	default:
		x, err = strconv.ParseInt(s, 10, 64)
	}
	if err != nil {
		return 0, false
	}
	return sign * x, true
}

func parseYAML11Float(v string) (float64, bool) {
	s := strings.ReplaceAll(v, "_", "")
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case ".inf":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case ".nan":
		return math.NaN(), true
	}
	if strings.Contains(s, ":") {
		sign := 1.0
		if strings.HasPrefix(s, "-") {
			sign, s = -1, s[1:]
		} else if strings.HasPrefix(s, "+") {
			s = s[1:]
		}
		var x float64
		for _, part := range strings.Split(s, ":") {
			d, err := strconv.ParseFloat(part, 64)
			if err != nil {
				return 0, false
			}
			x = x*60 + d
		}
		return sign * x, true
	}
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "-.") || strings.HasPrefix(s, "+.") {
		s = strings.Replace(s, ".", "0.", 1)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// strconv rejects "1." forms with exponent oddities; try trimming.
		f, err = strconv.ParseFloat(strings.TrimSuffix(s, "."), 64)
		if err != nil {
			return 0, false
		}
	}
	return f, true
}

// describe names the type of n for messages.
func (n *node) describe() string {
	if n == nil {
		return "nothing"
	}
	return n.kind.String()
}

func (n *node) String() string {
	switch n.kind {
	case nMap, nList, nNull:
		return n.kind.String()
	case nBool:
		return strconv.FormatBool(n.b)
	}
	return fmt.Sprintf("%q", n.scalarText())
}
