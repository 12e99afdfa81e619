package schema

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Checking a long collection chunk by chunk reports what one unification
// of the whole value reports, and more only where the value is really
// wrong: a failed disjunction makes CUE stop at its first bad element,
// while each chunk reports its own.
func TestCheckFieldLinear_sameErrorsAsOneUnification(t *testing.T) {
	c := newCueChecker()
	long := func(n int, item func(i int) string) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(item(i))
		}
		return b.String()
	}
	tests := []struct {
		name, def, field, yaml string
		bad                    []string // paths of the wrong values
	}{
		{"commands with bad items", "#Task", "commands", long(200, func(i int) string {
			switch i % 67 {
			case 5:
				return "- {a: 1}\n"
			case 6:
				return "- [1]\n"
			}
			return fmt.Sprintf("- echo %d\n", i)
		}), []string{"5", "6", "72", "73", "139", "140"}},
		{"env mapping with bad values", "#Task", "env", long(150, func(i int) string {
			if i%40 == 39 {
				return fmt.Sprintf("K%d: [1]\n", i)
			}
			return fmt.Sprintf("K%d: v\n", i)
		}), []string{"K39", "K79", "K119"}},
		{"env mapping bad only past the first chunk", "#Task", "env", long(150, func(i int) string {
			if i == 100 {
				return fmt.Sprintf("K%d: [1]\n", i)
			}
			return fmt.Sprintf("K%d: v\n", i)
		}), []string{"K100"}},
		{"volumes with bad entries", "#Task", "volumes", long(130, func(i int) string {
			if i == 100 {
				return "- {name: v, path: 3, bogus: 1}\n"
			}
			return fmt.Sprintf("- /data/%d:/mnt/%d\n", i, i)
		}), []string{"100"}},
		{"replica groups with a long commands list", "#Service", "replicas", long(70, func(i int) string {
			cmds := "[x]"
			if i == 66 {
				cmds = "[" + long(100, func(j int) string {
					if j == 90 {
						return "{bad: 1}, "
					}
					return "x, "
				}) + "x]"
			}
			if i == 68 {
				return fmt.Sprintf("- {name: g%d, count: [1], commands: [x]}\n", i)
			}
			return fmt.Sprintf("- {name: g%d, count: 1, commands: %s}\n", i, cmds)
		}), []string{"66.commands.90", "68.count"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, perr := parseYAML("x.dstack.yml", []byte(tt.yaml))
			if perr != nil {
				t.Fatal(perr)
			}
			fv := c.info(tt.def).fields[tt.field]
			render := func(es []relErr) []string {
				var out []string
				for _, e := range es {
					out = append(out, fmt.Sprintf("%s %d %s", strings.Join(e.path, "."), e.loc, e.msg))
				}
				slices.Sort(out)
				return slices.Compact(out)
			}
			whole := render(c.checkField(fv, doc, tt.field))
			chunked := render(c.checkFieldLinear(context.Background(), fv, doc, tt.field))
			if len(whole) == 0 {
				t.Fatal("the case has no errors")
			}
			for _, e := range whole {
				if !slices.Contains(chunked, e) {
					t.Errorf("chunk by chunk misses %q; got:\n%s", e, strings.Join(chunked, "\n"))
				}
			}
			for _, e := range chunked {
				path := strings.Fields(e)[0]
				if strings.HasPrefix(e, " ") || slices.ContainsFunc(tt.bad, func(b string) bool { return path == b || strings.HasPrefix(path, b+".") }) {
					continue
				}
				t.Errorf("chunk by chunk reports %q, not at a wrong value", e)
			}
		})
	}
}
