package schema

import (
	"testing"
	"testing/fstest"
)

func TestPosOf_pointsAtTheWrittenFieldOrItsNearestParent(t *testing.T) {
	src := "type: task\nname: train\nimage: busybox\ncommands: [\"true\"]\nvolumes:\n  - /data:/data\n  - instance_path: /\n    path: /host\nresources:\n  gpu: 1\n"
	d, err := Load(fstest.MapFS{"train.dstack.yml": {Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	r := d.Resources[0]
	for _, tc := range []struct {
		path      string
		line, col int
	}{
		{"volumes[0]", 6, 5},
		{"volumes[1].instance_path", 7, 20},
		{"volumes[1].path", 8, 11},
		{"resources.gpu", 10, 8},
		{"resources.disk", 10, 3}, // a default: the enclosing mapping
		{"volumes[7]", 6, 3},      // out of range: the list
		{"privileged", 1, 1},      // not written: the document
	} {
		p := r.PosOf(tc.path)
		if p.File != "train.dstack.yml" || p.Line != tc.line || p.Column != tc.col {
			t.Errorf("PosOf(%q) = %s, want train.dstack.yml:%d:%d", tc.path, p, tc.line, tc.col)
		}
	}
	e := r.FieldError("volumes[1].instance_path", "not allowed")
	if got, want := e.Error(), "train.dstack.yml:7:20: volumes[1].instance_path: not allowed"; got != want {
		t.Errorf("FieldError = %q, want %q", got, want)
	}
}
