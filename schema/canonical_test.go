package schema_test

import (
	"testing"
	"testing/fstest"

	"hoist/schema"
)

func loadOne(t *testing.T, src string) schema.Resource {
	t.Helper()
	d, err := schema.Load(fstest.MapFS{"spec.dstack.yml": &fstest.MapFile{Data: []byte(src)}})
	if err != nil {
		t.Fatalf("load:\n%s\n%v", src, err)
	}
	return d.Resources[0]
}

// TestCanonicalJSON_sameMeaningSameBytes checks that spellings dstack
// treats alike normalize byte-identically, so diffs never show phantom
// changes.
func TestCanonicalJSON_sameMeaningSameBytes(t *testing.T) {
	const head = "type: task\nname: t1\ncommands: [x]\n"
	for _, tc := range []struct{ name, a, b string }{
		{"gpu shorthand vs object", "resources:\n  gpu: A100:80GB:2\n", "resources:\n  gpu: {name: [A100], memory: 80GB, count: 2}\n"},
		{"gpu names order", "resources:\n  gpu: H100,A100:8\n", "resources:\n  gpu: A100,H100:8\n"},
		{"memory units", "resources:\n  memory: 8192MB..\n", "resources:\n  memory: {min: 8}\n"},
		{"memory default spelled out", "resources:\n  memory: 8GB..\n", ""},
		{"cpu forms", "resources:\n  cpu: 4\n", "resources:\n  cpu: {count: 4..4}\n"},
		{"cpu legacy min max", "resources:\n  cpu: {min: 4}\n", "resources:\n  cpu: 4..\n"},
		{"disk forms", "resources:\n  disk: 200GB\n", "resources:\n  disk: {size: 200GB..200GB}\n"},
		{"env map vs list", "env:\n  B: 2\n  A: x\n", "env:\n  - A=x\n  - B=2\n"},
		{"retry true vs object", "retry: true\n", "retry:\n  on_events: [error, interruption, no-capacity]\n  duration: 1h\n"},
		{"retry false vs omitted", "retry: false\n", ""},
		{"max_duration off spellings", "max_duration: off\n", "max_duration: false\n"},
		{"max_duration off vs omitted", "max_duration: \"off\"\n", ""},
		{"durations", "stop_duration: 5m\n", "stop_duration: 300\n"},
		{"idle duration default", "idle_duration: 5m\n", ""},
		{"idle off vs -1", "idle_duration: -1\n", "idle_duration: off\n"},
		{"ports forms", "ports: [8080]\n", "ports:\n  - local_port: 8080\n    container_port: 8080\n"},
		{"ports string", "ports: [\"8080\"]\n", "ports: [8080]\n"},
		{"volume forms", "volumes: [\"data:/data\"]\n", "volumes:\n  - name: data\n    path: /data\n"},
		{"instance volume", "volumes: [\"/mnt/x:/x/\"]\n", "volumes:\n  - instance_path: /mnt/x\n    path: /x\n"},
		{"backends order", "backends: [gcp, aws]\n", "backends: [aws, gcp]\n"},
		{"spot default", "spot_policy: on-demand\n", ""},
		{"nodes default", "nodes: 1\n", ""},
		{"python float", "python: 3.10\n", "python: \"3.10\"\n"},
		{"fleets ref forms", "fleets: [my-fleet]\n", "fleets:\n  - name: my-fleet\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := loadOne(t, head+tc.a), loadOne(t, head+tc.b)
			if string(a.JSON) != string(b.JSON) {
				t.Errorf("normalized JSON differs:\n%s\n%s", a.JSON, b.JSON)
			}
		})
	}
}

// TestCanonicalJSON_differentMeaningDifferentBytes guards against
// normalization that erases real changes.
func TestCanonicalJSON_differentMeaningDifferentBytes(t *testing.T) {
	const head = "type: task\nname: t1\ncommands: [x]\n"
	for _, tc := range []struct{ name, a, b string }{
		{"gpu count", "resources:\n  gpu: A100:2\n", "resources:\n  gpu: A100:4\n"},
		{"commands order", "commands: [a, b]\n", "commands: [b, a]\n"},
		{"env value", "env: [A=1]\n", "env: [A=2]\n"},
		{"env from local vs empty", "env: [A]\n", "env: [A=]\n"},
		{"disk null", "resources:\n  disk: null\n", ""},
		{"ports local", "ports: [\"*:8080\"]\n", "ports: [8080]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := loadOne(t, head+tc.a), loadOne(t, head+tc.b)
			if string(a.JSON) == string(b.JSON) {
				t.Errorf("different specs normalized alike:\n%s", a.JSON)
			}
		})
	}
}
