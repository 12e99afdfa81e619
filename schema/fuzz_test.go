package schema_test

import (
	"errors"
	"testing"
	"testing/fstest"

	"hoist/schema"
)

// The fuzz targets check that the grammars and the loader never panic and
// that what they accept is self-consistent.

func FuzzParseGPU(f *testing.F) {
	for _, s := range []string{"A100:80GB:8", "24GB..:2", "nvidia:1..8", "MI300X", "0", "tpu:v5litepod-4", "A10G,A100:1..", "tt-galaxy-wh:32", "::", "A100:H100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := schema.ParseGPU(s)
		if err != nil {
			return
		}
		if g.Count.Min != nil && g.Count.Max != nil && *g.Count.Min > *g.Count.Max {
			t.Fatalf("%q: accepted an inverted count %s", s, g.Count)
		}
	})
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"2", "2..", "..8", "2..8", "..", "8..2", " 1 .. 3 ", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := schema.ParseRange(s)
		if err != nil {
			return
		}
		if r.Min == nil && r.Max == nil {
			t.Fatalf("%q: accepted an empty range", s)
		}
		if r2, err := schema.ParseRange(r.String()); err != nil || r2.String() != r.String() {
			t.Fatalf("%q: %s does not round-trip: %v", s, r, err)
		}
	})
}

func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"8GB", "512MB", "1TB", "24", "1.5gb", " 16 GB ", "8GB..", "40GB..80GB", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = schema.ParseMemory(s)
		r, err := schema.ParseMemoryRange(s)
		if err == nil && r.Min != nil && r.Max != nil && *r.Min > *r.Max {
			t.Fatalf("%q: accepted an inverted range", s)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90", "30s", "5m", "2h", "1d", "1w", "5 m", "-1", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := schema.ParseDuration(s)
		if err == nil && v > 0 {
			if w, err := schema.ParseDuration(schema.FormatDuration(v)); err != nil || w != v {
				t.Fatalf("%q: %d does not round-trip through %q", s, v, schema.FormatDuration(v))
			}
		}
	})
}

func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"8080", "80:8080", "*:8080", ":80", "0", "65536", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := schema.ParsePort(s)
		if err != nil {
			return
		}
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || (p.LocalPort != nil && (*p.LocalPort < 1 || *p.LocalPort > 65535)) {
			t.Fatalf("%q: accepted out-of-range port %+v", s, p)
		}
	})
}

func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"type: task\ncommands: [echo]\n",
		"type: service\nimage: x\nport: 80\nreplicas: 0..2\nscaling: {metric: rps, target: 1}\n",
		"type: fleet\nnodes: 0..2\nresources: {gpu: A100:8}\n",
		"type: volume\nbackend: aws\nregion: x\nsize: 10GB\n",
		"type: gateway\nbackend: aws\nregion: x\ndomain: a.b\n",
		"type: dev-environment\nide: vscode\nenv: {A: 1}\n",
		"a: &x [1]\nb: *x\n<<: {type: task}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fsys := fstest.MapFS{"fuzz.dstack.yml": &fstest.MapFile{Data: []byte(s)}}
		d, err := schema.Load(fsys)
		if err != nil {
			var errs schema.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Load error is not a non-empty Errors: %v", err)
			}
			for _, e := range errs {
				if e.Pos.Line < 1 || e.Pos.Column < 1 {
					t.Fatalf("error without a position: %v", e)
				}
			}
			return
		}
		if len(d.Resources) != 1 || len(d.Resources[0].JSON) == 0 {
			t.Fatalf("valid spec without exactly one resource: %+v", d)
		}
	})
}

func FuzzLoadCUE(f *testing.F) {
	for _, s := range []string{
		"package x\ntrain: {type: \"task\", commands: [\"x\"]}\n",
		"package x\nfor i in [1,2] {\"t-\\(i)\": #Task & {commands: [\"x\"]}}\n",
		"package x\na: #Service & {port: 80, image: \"n\"}\nb: a & {name: \"bb\"}\n",
		"x: {type: \"fleet\", nodes: 2}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fsys := fstest.MapFS{"specs/fuzz.cue": &fstest.MapFile{Data: []byte(s)}}
		_, err := schema.Load(fsys)
		if err != nil {
			var errs schema.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Load error is not a non-empty Errors: %v", err)
			}
		}
	})
}
