package schema_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"hoist/schema"
)

// bigList is a task whose commands list holds n items, on line 4.
func bigList(n int) []byte {
	var b strings.Builder
	b.WriteString("type: task\nname: big\nimage: x\ncommands:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - %d\n", i)
	}
	return []byte(b.String())
}

func loadErrs(t *testing.T, ctx context.Context, fsys fstest.MapFS) schema.Errors {
	t.Helper()
	_, err := schema.LoadContext(ctx, fsys)
	var es schema.Errors
	if !errors.As(err, &es) {
		t.Fatalf("want schema.Errors, got %v", err)
	}
	return es
}

func TestLoad_refusesWhatExceedsALimitNamingIt(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"YAML list over the list limit", fstest.MapFS{"big.dstack.yml": {Data: bigList(80_000)}},
			"big.dstack.yml:4:1: commands: 80000 items, more than the limit of 10000 per list"},
		{"file over the file limit", fstest.MapFS{"huge.dstack.yml": {Data: append([]byte("type: task\ncommands: [x]\n#"), make([]byte, schema.MaxFileBytes)...)}},
			"huge.dstack.yml:1:1: file is 1048602 bytes, more than the limit of 1 MiB per spec file"},
		{"mapping over the key limit", fstest.MapFS{"env.dstack.yml": {Data: func() []byte {
			var b strings.Builder
			b.WriteString("type: task\ncommands: [x]\nenv:\n")
			for i := 0; i < 10_001; i++ {
				fmt.Fprintf(&b, "  K%d: v\n", i)
			}
			return []byte(b.String())
		}()}}, "env.dstack.yml:4:3: env: 10001 keys, more than the limit of 10000 per mapping"},
		{"CUE comprehension over the list limit", fstest.MapFS{"big.cue": {Data: []byte(`package x
import "list"
t: {type: "task", commands: [for i in list.Range(0, 3000000, 1) {"echo \(i)"}]}
`)}}, "big.cue:3:30: comprehension iterates over 3000000 values, more than the limit of 10000 per list"},
		{"nested CUE comprehensions multiplying past the limit", fstest.MapFS{"nest.cue": {Data: []byte(`package x
l: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
t: {type: "task", commands: [for a in l for b in l for c in l for d in l for e in l {"x"}]}
`)}}, "nest.cue:3:30: comprehension iterates over 100000 values, more than the limit of 10000 per list"},
		{"CUE list built past the limit", fstest.MapFS{"built.cue": {Data: []byte(`package x
import "strings"
t: {type: "task", commands: strings.Split(strings.Repeat("x,", 10000) + "x", ",")}
`)}}, "commands: 10001 items, more than the limit of 10000 per list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			es := loadErrs(t, context.Background(), tt.fsys)
			if len(es) != 1 || !strings.Contains(es[0].Error(), tt.want) {
				t.Fatalf("errors:\n%v\nwant one containing:\n%s", es, tt.want)
			}
			t.Logf("refused in %v", time.Since(start))
		})
	}
}

func TestLoad_revisionOverFileCountLimitIsRefused(t *testing.T) {
	fsys := fstest.MapFS{}
	for i := 0; i <= schema.MaxRevisionFiles; i++ {
		fsys[fmt.Sprintf("s/%05d.dstack.yml", i)] = &fstest.MapFile{Data: []byte("type: task\ncommands: [x]\n")}
	}
	es := loadErrs(t, context.Background(), fsys)
	if len(es) != 1 || !strings.Contains(es[0].Msg, "more than 20000 spec files in the revision") {
		t.Fatalf("errors: %v", es)
	}
}

// Long lists are checked chunk by chunk: errors keep their index, line and
// message wherever they fall, as with a short list.
func TestLoad_longListErrorsKeepTheirPositions(t *testing.T) {
	var b strings.Builder
	b.WriteString("type: task\nimage: x\ncommands:\n")
	for i := 0; i < 300; i++ {
		if i == 5 || i == 70 || i == 299 {
			b.WriteString("  - {a: 1}\n")
			continue
		}
		fmt.Fprintf(&b, "  - echo %d\n", i)
	}
	b.WriteString("env:\n")
	for i := 0; i < 200; i++ {
		if i == 150 {
			b.WriteString("  BAD: [1]\n")
			continue
		}
		fmt.Fprintf(&b, "  K%d: v\n", i)
	}
	es := loadErrs(t, context.Background(), fstest.MapFS{"t.dstack.yml": {Data: []byte(b.String())}})
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%d:%s", e.Pos.Line, e.Path))
	}
	want := "9:commands[5] 74:commands[70] 303:commands[299] 455:env.BAD"
	if strings.Join(got, " ") != want {
		t.Fatalf("errors at %v, want %s:\n%v", got, want, es)
	}
}

// A CUE evaluation still running at the deadline is abandoned: the load
// returns at once with an error naming the deadline, and the same content
// is refused at once afterwards.
func TestLoadContext_abandonsCUEEvaluationAtTheDeadline(t *testing.T) {
	src := "package x\nimport \"list\"\nm: 4999 * 2 + 1\n" +
		"t: {type: \"task\", commands: [for i in list.Range(0, m, 1) {\"echo \\(i)\"}]}\n"
	for i := 0; i < 8; i++ {
		src += fmt.Sprintf("pad%d: [for i in list.Range(0, m, 1) {\"%d-\\(i)\"}]\n", i, i)
	}
	fsys := fstest.MapFS{"slow.cue": {Data: []byte(src)}}
	// The static check sees nine lists of 9999 (each under the limit), so
	// the evaluation runs (about a second) and meets the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	es := loadErrs(t, ctx, fsys)
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Errorf("returned after %v", took)
	}
	if len(es) != 1 || !strings.Contains(es[0].Msg, "CUE evaluation stopped at the revision's deadline") {
		t.Fatalf("errors: %v", es)
	}
	es = loadErrs(t, context.Background(), fsys)
	if len(es) != 1 || !strings.Contains(es[0].Msg, "outlived the deadline of an earlier load") {
		t.Fatalf("second load: %v", es)
	}
}
