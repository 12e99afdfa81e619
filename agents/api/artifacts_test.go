package api_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
)

// tarOf builds a tar of the given headers, each file's content being its
// name repeated to its size.
func tarOf(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(strings.Repeat("x", int(h.Size)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEachArtifact_yieldsRegularFilesAndRefusesBadEntries(t *testing.T) {
	tests := []struct {
		name    string
		entries []*tar.Header
		want    []string
		wantErr string // the entry named in the error; "" = no error
	}{
		{"files in order, directories passed over", []*tar.Header{
			{Name: "out/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "out/a.txt", Mode: 0o640},
			{Name: "out/empty/", Typeflag: tar.TypeDir},
			{Name: "data/b", Mode: 0o700, Size: 3},
		}, []string{"out/a.txt 9 -rw-r-----", "data/b 3 -rwx------"}, ""},
		{"an absolute name", []*tar.Header{{Name: "ok"}, {Name: "/etc/passwd"}}, []string{"ok 2 ----------"}, "/etc/passwd"},
		{"a name leaving through ..", []*tar.Header{{Name: "a/../../b"}}, nil, "a/../../b"},
		{"a name that is ..", []*tar.Header{{Name: "../", Typeflag: tar.TypeDir}}, nil, "../"},
		{"a name that is not clean", []*tar.Header{{Name: "a//b"}}, nil, "a//b"},
		{"a name with ./", []*tar.Header{{Name: "./a"}}, nil, "./a"},
		{"a name with a backslash", []*tar.Header{{Name: `a\..\b`}}, nil, `a\..\b`},
		{"the root as a directory", []*tar.Header{{Name: "./", Typeflag: tar.TypeDir}}, nil, "./"},
		{"a symlink", []*tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}}, nil, "l"},
		{"a hard link", []*tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}}, nil, "h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := api.EachArtifact(bytes.NewReader(tarOf(t, tt.entries...)), func(name string, size int64, mode fs.FileMode, body io.Reader) error {
				b, err := io.ReadAll(body)
				if int64(len(b)) != size {
					t.Errorf("%s: read %d bytes, size %d", name, len(b), size)
				}
				got = append(got, fmt.Sprintf("%s %d %v", name, size, mode))
				return err
			})
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.wantErr != "" && (!errors.Is(err, api.ErrBadArtifact) || !strings.Contains(err.Error(), strconv.Quote(tt.wantErr))):
				t.Errorf("err = %v, want ErrBadArtifact naming %q", err, tt.wantErr)
			}
		})
	}
}

func TestEachArtifact_truncatedArchiveFails(t *testing.T) {
	b := tarOf(t, &tar.Header{Name: "a", Size: 4096})
	err := api.EachArtifact(bytes.NewReader(b[:1024]), func(string, int64, fs.FileMode, io.Reader) error { return nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestEachArtifact_returnsTheCallbacksError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := api.EachArtifact(bytes.NewReader(tarOf(t, &tar.Header{Name: "a"}, &tar.Header{Name: "b"})), func(string, int64, fs.FileMode, io.Reader) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("err = %v after %d calls, want the callback's error after 1", err, calls)
	}
}

func TestRunnerClient_artifactsReadsTheMissingHeader(t *testing.T) {
	many := make([]string, 5000)
	for i := range many {
		many[i] = fmt.Sprintf("dir,%d/file %d", i, i)
	}
	tests := []struct {
		name    string
		missing []string
		want    []string
	}{
		{"none", nil, nil},
		{"names with commas, spaces and percent signs", []string{"a,b", "c d", "100%", "/abs/x"}, []string{"a,b", "c d", "100%", "/abs/x"}},
		{"too many are cut with a count", many, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPaths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPaths = r.URL.Query()["path"]
				w.Header().Set(api.APIVersionHeader, strconv.Itoa(api.RunnerAPIVersion))
				w.Header().Set("Content-Type", api.ArtifactsContentType)
				if v := api.FormatArtifactsMissing(tt.missing); v != "" {
					if len(v) > api.MaxArtifactsMissingBytes {
						t.Errorf("header of %d bytes, more than %d", len(v), api.MaxArtifactsMissingBytes)
					}
					w.Header().Set(api.ArtifactsMissingHeader, v)
				}
				_, _ = w.Write(tarOf(t, &tar.Header{Name: "out/a"}))
			}))
			defer srv.Close()
			asked := []string{"out", "/abs/x", "a,b&c=d"}
			body, missing, err := api.NewRunnerClient(srv.URL, nil).Artifacts(context.Background(), asked)
			if err != nil {
				t.Fatal(err)
			}
			defer body.Close()
			if d := cmp.Diff(asked, gotPaths); d != "" {
				t.Errorf("paths sent (-want +got):\n%s", d)
			}
			if tt.want != nil || tt.missing == nil {
				if d := cmp.Diff(tt.want, missing); d != "" {
					t.Errorf("missing (-want +got):\n%s", d)
				}
			} else {
				last := missing[len(missing)-1]
				n := len(missing) - 1
				if d := cmp.Diff(tt.missing[:n], missing[:n]); d != "" || last != fmt.Sprintf("... and %d more", len(tt.missing)-n) {
					t.Errorf("cut list ends %q after %d items (diff %s)", last, n, d)
				}
			}
			n := 0
			if err := api.EachArtifact(body, func(string, int64, fs.FileMode, io.Reader) error { n++; return nil }); err != nil || n != 1 {
				t.Errorf("EachArtifact: %d files, %v; want 1", n, err)
			}
		})
	}
}

func TestRunnerClient_artifactsRefusesAnotherContentType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(api.APIVersionHeader, strconv.Itoa(api.RunnerAPIVersion))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	if _, _, err := api.NewRunnerClient(srv.URL, nil).Artifacts(context.Background(), []string{"out"}); err == nil || !strings.Contains(err.Error(), "content type") {
		t.Errorf("err = %v, want a content type error", err)
	}
}
