package schema_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/schema"
)

// generateRepo builds n specs across all six kinds, each distinct.
func generateRepo(n int) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i := 0; i < n; i++ {
		var src string
		switch i % 6 {
		case 0:
			src = fmt.Sprintf("type: task\nname: train-%d\npython: \"3.12\"\nenv:\n  - HF_TOKEN\n  - SHARD=%d\ncommands:\n  - pip install -r requirements.txt\n  - python train.py --shard %d\nresources:\n  gpu: A100:80GB:%d\n  shm_size: 16GB\n  disk: 200GB..\nmax_duration: 2h\nretry: true\nspot_policy: auto\n", i, i, i, i%8+1)
		case 1:
			src = fmt.Sprintf("type: service\nname: serve-%d\nimage: vllm/vllm-openai:latest\ncommands:\n  - vllm serve model-%d\nport: 8000\nmodel: model-%d\nreplicas: 1..%d\nscaling:\n  metric: rps\n  target: 10\nresources:\n  gpu: 24GB..80GB:1..2\n  cpu: 8..\n", i, i, i, i%4+2)
		case 2:
			src = fmt.Sprintf("type: dev-environment\nname: dev-%d\nide: vscode\npython: 3.11\ninactivity_duration: 2h\nresources:\n  gpu: nvidia:1\nvolumes:\n  - data-%d:/data\n", i, i)
		case 3:
			src = fmt.Sprintf("type: fleet\nname: fleet-%d\nnodes: 0..%d\nplacement: cluster\nbackends: [aws, gcp]\nresources:\n  gpu: H100:8\nidle_duration: 1h\n", i, i%8+1)
		case 4:
			src = fmt.Sprintf("type: volume\nname: vol-%d\nbackend: aws\nregion: eu-west-1\nsize: %dGB\n", i, 100+i)
		case 5:
			src = fmt.Sprintf("type: gateway\nname: gw-%d\nbackend: aws\nregion: eu-west-1\ndomain: gw%d.example.com\n", i, i)
		}
		fsys[fmt.Sprintf("specs/%d/%d.dstack.yml", i/100, i)] = &fstest.MapFile{Data: []byte(src)}
	}
	return fsys
}

// BenchmarkLoad_10000 validates and normalizes a generated repo of 10,000
// specs with nothing memoized (goal: ≤ 2 s on 2 cores, ≤ 300 MB peak; the
// peak resident set is reported as peak-RSS-MB).
func BenchmarkLoad_10000(b *testing.B) {
	fsys := generateRepo(10000)
	b.ReportAllocs()
	for b.Loop() {
		schema.DropFieldCache()
		schema.DropCachedValidators()
		load10000(b, fsys)
	}
	reportPeakRSS(b)
}

// BenchmarkLoad_10000_unchanged re-validates an unchanged revision: the
// daemon's common case, where memoized field verdicts apply.
func BenchmarkLoad_10000_unchanged(b *testing.B) {
	fsys := generateRepo(10000)
	load10000(b, fsys)
	b.ReportAllocs()
	for b.Loop() {
		load10000(b, fsys)
	}
	reportPeakRSS(b)
}

func load10000(b *testing.B, fsys fstest.MapFS) {
	d, err := schema.Load(fsys)
	if err != nil {
		b.Fatal(err)
	}
	if len(d.Resources) != 10000 {
		b.Fatalf("got %d resources", len(d.Resources))
	}
}

// reportPeakRSS reports the process's peak resident set (VmHWM) in MB.
func reportPeakRSS(b *testing.B) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%f", &kb)
			b.ReportMetric(kb/1024, "peak-RSS-MB")
		}
	}
}

// BenchmarkLoad_oneSpecCold loads one spec including compiling the schema.
func BenchmarkLoad_oneSpecCold(b *testing.B) {
	fsys := generateRepo(1)
	b.ReportAllocs()
	for b.Loop() {
		schema.DropCachedValidators()
		schema.DropFieldCache()
		if _, err := schema.Load(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad_oneSpecWarm loads one spec with the schema already compiled.
func BenchmarkLoad_oneSpecWarm(b *testing.B) {
	fsys := generateRepo(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.Load(fsys); err != nil {
			b.Fatal(err)
		}
	}
}
