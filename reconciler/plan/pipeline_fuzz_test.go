package plan_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// FuzzRevisionPipeline runs a generated tree of spec files through what a
// sync does with a revision (schema.LoadContext, then plan.Compute against
// nothing and against the revision itself with a few resources changed)
// and fails on any input whose processing takes more CPU than a second per
// megabyte of files (at least a second). CPU time, not wall time, so that a
// busy machine does not fail it; what the daemon adds on top (its per
// revision deadline) is not applied here, so a slow input is seen as slow.
func FuzzRevisionPipeline(f *testing.F) {
	f.Add("type: task\ncommands: [echo hi]\nresources: {gpu: A100:2}\n", "package x\na: {type: \"service\", port: 80, commands: [\"x\"]}\n", uint8(2), uint16(0), "echo")
	f.Add("type: fleet\nnodes: 2\nresources: {gpu: 24GB}\n", "", uint8(0), uint16(300), "python train.py --shard 1")
	f.Add("type: volume\nbackend: aws\nregion: eu-west-1\nsize: 100GB\n", "package x\nimport \"list\"\nt: {type: \"task\", commands: [for i in list.Range(0, 3000000, 1) {\"\\(i)\"}]}\n", uint8(1), uint16(9000), "x")
	f.Add("type: task\nenv: &e {A: b}\nx: [*e, *e, *e]\n", "package x\nl: [0,1,2,3,4,5,6,7,8,9]\nt: {type: \"task\", commands: [for a in l for b in l for c in l {\"x\"}]}\n", uint8(5), uint16(20000), "{a: 1}")
	f.Fuzz(func(t *testing.T, yml, cue string, copies uint8, items uint16, item string) {
		fsys := fstest.MapFS{}
		size := 0
		put := func(name, body string) {
			fsys[name] = &fstest.MapFile{Data: []byte(body)}
			size += len(body)
		}
		put("a.dstack.yml", yml)
		for i := 0; i < int(copies%32); i++ {
			put(fmt.Sprintf("copies/c%d.dstack.yml", i), strings.Replace(yml, "type:", fmt.Sprintf("name: copy-%d\ntype:", i), 1))
		}
		if cue != "" {
			put("cue/specs.cue", cue)
		}
		if items > 0 {
			var b strings.Builder
			b.WriteString("type: task\nname: long\ncommands:\n")
			for i := 0; i < int(items); i++ {
				fmt.Fprintf(&b, "  - %s %d\n", item, i)
			}
			put("long.dstack.yml", b.String())
		}
		budget := max(time.Second, time.Duration(float64(size)/(1<<20)*float64(time.Second)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*budget)
		defer cancel()
		c0 := cpuTime()
		d, err := schema.LoadContext(ctx, fsys)
		if err == nil {
			p := plan.Compute(d.Resources, plan.Observed{}, genNow, plan.Options{})
			var obs plan.Observed
			for i, r := range d.Resources {
				spec := r.JSON
				if i%2 == 1 {
					spec = []byte(`{"changed":true}`)
				}
				obs.Resources = append(obs.Resources, plan.Current{Kind: r.Kind, Name: r.Name, File: r.File, Spec: spec, Status: "running"})
			}
			obs.Resources = append(obs.Resources, plan.Current{Kind: schema.KindTask, Name: "gone", Spec: []byte(`{}`), Status: "running"})
			p2 := plan.Compute(d.Resources, obs, genNow, plan.Options{})
			if len(p.Steps) < len(d.Resources) || len(p2.Steps) < len(d.Resources) {
				t.Fatalf("plans of %d resources have %d and %d steps", len(d.Resources), len(p.Steps), len(p2.Steps))
			}
		}
		if used := cpuTime() - c0; used > budget {
			t.Fatalf("%d bytes in %d files took %v of CPU, more than %v (err %.200v)", size, len(fsys), used, budget, err)
		}
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
