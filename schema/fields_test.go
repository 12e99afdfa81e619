package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decoderFieldKeys returns every key the decoder passes to fieldsAt or
// fieldsExcept as a literal, and the keys it builds at run time.
func decoderFieldKeys(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || (id.Name != "fieldsAt" && id.Name != "fieldsExcept") {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				k, _ := strconv.Unquote(lit.Value)
				keys = append(keys, k)
			}
			return true
		})
	}
	if len(keys) < 30 {
		t.Fatalf("found only %d literal keys in the decoder", len(keys))
	}
	for _, def := range defNames {
		keys = append(keys, def)
	}
	for _, def := range volumeDefs {
		keys = append(keys, def)
	}
	for _, format := range []string{"openai", "tgi"} {
		keys = append(keys, "#Service.model{format="+format+"}")
	}
	return keys
}

// TestFieldsAt_everyKeyTheDecoderUsesNamesOneMapping fails when a key of
// the decoder's strict checks names no mapping of the embedded schema (a
// renamed definition) or several (a selector that no longer picks one).
func TestFieldsAt_everyKeyTheDecoderUsesNamesOneMapping(t *testing.T) {
	for _, k := range decoderFieldKeys(t) {
		if f, ok := fieldTable()[k]; !ok || len(f) == 0 {
			t.Errorf("key %q: the schema has no single mapping with fields there", k)
		}
	}
}

// TestFieldsAt_followsTheSchema pins a few derived lists, including a
// mapping picked among several by a field and by a field's value.
func TestFieldsAt_followsTheSchema(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"#Resources", []string{"cpu", "disk", "gpu", "memory", "shm_size"}},
		{"#MountPoint{instance_path}", []string{"instance_path", "optional", "path"}},
		{"#MountPoint{name}", []string{"name", "optional", "path"}},
		{"#Service.model{format=tgi}", []string{"chat_template", "eos_token", "format", "name", "type"}},
		{"#Gateway.certificate", []string{"arn", "type"}},
		{"#Fleet.ssh_config.hosts[]", []string{"blocks", "hostname", "identity_file", "internal_ip", "port", "proxy_jump", "ssh_key", "user"}},
		{"#Profile.instances[]{fleet}", []string{"fleet", "instance"}},
	}
	for _, tt := range tests {
		got := sortedSet(fieldsAt(tt.key))
		if !slices.Equal(got, tt.want) {
			t.Errorf("fieldsAt(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
	if got := fieldsExcept("#CPU", "min", "max"); !slices.Equal(sortedSet(got), []string{"arch", "count"}) {
		t.Errorf("fieldsExcept(#CPU, min, max) = %v", got)
	}
}

// TestFieldsAt_ambiguousSelectorPanics checks that a selector matching
// several mappings is refused rather than answered with one of them.
func TestFieldsAt_ambiguousSelectorPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("fieldsAt(#MountPoint{path}) did not panic")
		}
	}()
	fieldsAt("#MountPoint{path}")
}
