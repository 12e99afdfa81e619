package schema_test

import (
	"encoding/json"
	"testing"

	"hoist/schema"
)

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestParseGPU(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "A100:80GB:8", want: `{"name":["A100"],"count":{"min":8,"max":8},"memory":{"min":80,"max":80}}`},
		{in: "24GB..:2", want: `{"count":{"min":2,"max":2},"memory":{"min":24}}`},
		{in: "nvidia:1..8", want: `{"vendor":"nvidia","count":{"min":1,"max":8}}`},
		{in: "MI300X", want: `{"name":["MI300X"],"count":{"min":1}}`},
		{in: "0", want: `{"count":{"min":0,"max":0}}`},
		{in: "tpu:v5litepod-4", want: `{"vendor":"google","name":["v5litepod-4"],"count":{"min":1}}`},
		{in: "tpu-v2-8", want: `{"name":["v2-8"],"count":{"min":1}}`},
		{in: "tt:n150", want: `{"vendor":"tenstorrent","name":["n150"],"count":{"min":1}}`},
		{in: "A10G,A100:40GB..80GB:1..", want: `{"name":["A100","A10G"],"count":{"min":1},"memory":{"min":40,"max":80}}`},
		{in: " A100 : 2 ", want: `{"name":["A100"],"count":{"min":2,"max":2}}`},
		{in: "AMD:MI300X:8", want: `{"vendor":"amd","name":["MI300X"],"count":{"min":8,"max":8}}`},
		{in: "A100:H100", err: "GPU spec name conflict: A100:H100"},
		{in: "nvidia:amd", err: "GPU spec vendor conflict: nvidia:amd"},
		{in: "1:2", err: "GPU spec count conflict: 1:2"},
		{in: "24GB:48GB", err: "GPU spec memory conflict: 24GB:48GB"},
		{in: "A100::2", err: "GPU spec contains empty token: A100::2"},
		{in: "A100,", err: "GPU name can not be empty: A100,"},
		{in: "8..2", err: "invalid range order: 8..2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g, err := schema.ParseGPU(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := js(g); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2", "2"}, {"2..", "2.."}, {"..8", "..8"}, {"2..8", "2..8"}, {" 1 .. 3 ", "1..3"},
		{"..", "error"}, {"8..2", "error"}, {"a", "error"}, {"1..2..3", "error"}, {"1.5", "error"},
	} {
		r, err := schema.ParseRange(tc.in)
		got := r.String()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("ParseRange(%q) = %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"8GB", 8, true}, {"512MB", 0.5, true}, {"1TB", 1024, true}, {"24", 24, true},
		{"1.5gb", 1.5, true}, {" 16 GB ", 16, true}, {"8XB", 0, false}, {"GB", 0, false}, {"", 0, false},
	} {
		got, err := schema.ParseMemory(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMemory(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"90", 90, true}, {"30s", 30, true}, {"5m", 300, true}, {"2h", 7200, true}, {"1d", 86400, true},
		{"1w", 604800, true}, {"5 m", 300, true}, {"-1", -1, true}, {"2 hours", 0, false}, {"1.5h", 0, false}, {"h", 0, false},
	} {
		got, err := schema.ParseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParsePort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"8080", `{"local_port":8080,"container_port":8080}`},
		{"80:8080", `{"local_port":80,"container_port":8080}`},
		{"*:8080", `{"container_port":8080}`},
		{"0", "error"}, {"65536", "error"}, {"a:80", "error"}, {"80:", "error"}, {"", "error"},
	} {
		p, err := schema.ParsePort(tc.in)
		got := js(p)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("ParsePort(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseMountPoint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"data:/data", `{"name":["data"],"path":"/data"}`},
		{"/mnt/cache:/root/.cache/", `{"instance_path":"/mnt/cache","path":"/root/.cache"}`},
		{"data:relative", "error"}, {"/a/../b:/c", "error"}, {"a:b:c", "error"}, {"data", "error"},
	} {
		m, err := schema.ParseMountPoint(tc.in)
		got := js(m)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("ParseMountPoint(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"8", `{"count":{"min":8,"max":8}}`},
		{"8..", `{"count":{"min":8}}`},
		{"arm:8", `{"arch":"arm","count":{"min":8,"max":8}}`},
		{"x86:4..16", `{"arch":"x86","count":{"min":4,"max":16}}`},
		{"arm", `{"arch":"arm","count":{"min":2}}`},
		{"sparc:8", "error"}, {"arm:x86", "error"}, {"4:8", "error"},
	} {
		c, err := schema.ParseCPU(tc.in)
		got := js(c)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("ParseCPU(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
