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

// decoderKeys returns every key the decoder passes as a literal to one of
// the functions named in funcs.
func decoderKeys(t *testing.T, funcs ...string) []string {
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
			if id, ok := call.Fun.(*ast.Ident); !ok || !slices.Contains(funcs, id.Name) {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				k, _ := strconv.Unquote(lit.Value)
				keys = append(keys, k)
			}
			return true
		})
	}
	return keys
}

// decoderFieldKeys returns every key the decoder passes to fieldsAt or
// fieldsExcept, including those it builds at run time.
func decoderFieldKeys(t *testing.T) []string {
	t.Helper()
	keys := decoderKeys(t, "fieldsAt", "fieldsExcept", "requiredAt")
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
		if f, ok := schemaTable().fields[k]; !ok || len(f) == 0 {
			t.Errorf("key %q: the schema has no single mapping with fields there", k)
		}
	}
}

// TestValuesAt_everyKeyTheDecoderUsesHasValues fails when a key of the
// decoder's enum checks names no string literals of the embedded schema.
func TestValuesAt_everyKeyTheDecoderUsesHasValues(t *testing.T) {
	keys := decoderKeys(t, "valuesAt")
	if len(keys) < 20 {
		t.Fatalf("found only %d literal keys in the decoder", len(keys))
	}
	for _, k := range keys {
		if len(schemaTable().values[k]) == 0 {
			t.Errorf("key %q: the schema has no string literals there", k)
		}
	}
}

// TestValuesAt_keepsTheSchemaOrder pins a few derived enums: errors list
// the allowed values in the order the schema gives them.
func TestValuesAt_keepsTheSchemaOrder(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"#SpotPolicy", []string{"spot", "on-demand", "auto"}},
		{"#Volume.backend", []string{"aws", "gcp", "azure", "runpod", "verda", "kubernetes"}},
		{"#Gateway.certificate.type", []string{"lets-encrypt", "acm"}},
		{"#Python", []string{"3.9", "3.10", "3.11", "3.12", "3.13", "3.14"}},
	}
	for _, tt := range tests {
		if got := valuesAt(tt.key); !slices.Equal(got, tt.want) {
			t.Errorf("valuesAt(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
	if b := valuesAt("#Backend"); b[0] != "amddevcloud" || b[len(b)-1] != "local" {
		t.Errorf("valuesAt(#Backend) = %v", b)
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
	if got := requiredAt("#SSHProxy"); !slices.Equal(got, []string{"hostname", "user", "identity_file"}) {
		t.Errorf("requiredAt(#SSHProxy) = %v", got)
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
