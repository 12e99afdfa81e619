package reconciler

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestSpecRepoPath_resolvesAgainstTheSpecDirAndStaysInTheRepository(t *testing.T) {
	for _, tc := range []struct {
		base, local, want string
		ok                bool
	}{
		{"specs", "..", ".", true},
		{"specs", ".", "specs", true},
		{"specs", "../conf/a.txt", "conf/a.txt", true},
		{".", "app", "app", true},
		{".", "..", "", false},
		{"specs", "../../x", "", false},
		{"specs", "/etc", "", false},
	} {
		got, ok := specRepoPath(tc.base, tc.local)
		if got != tc.want || ok != tc.ok {
			t.Errorf("specRepoPath(%q, %q) = %q, %v; want %q, %v", tc.base, tc.local, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAddTree_archivesAFileOrADirectoryUnderItsName(t *testing.T) {
	fsys := fstest.MapFS{
		"app/a.txt":     {Data: []byte("A")},
		"app/bin/run":   {Data: []byte("R"), Mode: 0o755},
		"conf/settings": {Data: []byte("S")},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := addTree(tw, fsys, "app", "repo", &buf); err != nil {
		t.Fatal(err)
	}
	if err := addTree(tw, fsys, "conf/settings", "files/0", &buf); err != nil {
		t.Fatal(err)
	}
	if err := addTree(tw, fsys, "missing", "files/1", &buf); err == nil {
		t.Error("addTree of a missing path succeeded")
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got = append(got, h.Name+" "+string(rune('0'+h.Mode>>6&7))+" "+string(body))
	}
	want := []string{"repo/ 7 ", "repo/a.txt 6 A", "repo/bin/ 7 ", "repo/bin/run 7 R", "files/0 6 S"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
}
