package schema

import "testing"

func TestParseYAML_errorsAreAtTheParsersPosition(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unclosed flow sequence at the end", "type: task\ncommands: [x\n",
			"f.yml:3:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence started at 2:11)"},
		{"unclosed flow sequence before a key", "a: [1, 2\nb: 3\n",
			"f.yml:2:2: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence started at 1:4)"},
		{"mapping value in a scalar", "a: b\n c: d\n",
			"f.yml:2:3: invalid YAML: mapping values are not allowed in this context"},
		{"tab indentation", "\tx: 1\n",
			"f.yml:1:1: invalid YAML: found character that cannot start any token"},
		{"unterminated quote", "a: 'x\n",
			"f.yml:2:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar started at 1:4)"},
		{"unknown anchor", "a: *nope\n",
			"f.yml:1:4: invalid YAML: unknown anchor 'nope' referenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseYAML("f.yml", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
