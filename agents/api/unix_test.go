package api_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/agents/api"
)

// TestUnixAddr_reachesSocketsWithShortAndLongPaths serves HTTP on Unix
// sockets, one at a path too long for connect(2), and calls each through
// NewLocalTransport: each answer comes from its own socket.
func TestUnixAddr_reachesSocketsWithShortAndLongPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dir  string
	}{
		{"short path", t.TempDir()},
		{"path longer than sun_path", filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))},
	}
	hc := &http.Client{Transport: api.NewLocalTransport()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.MkdirAll(tt.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(tt.dir, "a.sock")
			// bind(2) takes no longer paths either: name the directory by
			// its descriptor.
			dir, err := os.Open(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer dir.Close()
			ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/a.sock", dir.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, tt.name) })}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
			addr := api.UnixAddr(sock)
			if p, ok := api.SocketPath(addr); !ok || p != sock {
				t.Fatalf("SocketPath(%q) = %q, %v", addr, p, ok)
			}
			resp, err := hc.Get(api.BaseURL(addr) + "/x")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tt.name {
				t.Errorf("answer %q, want %q", b, tt.name)
			}
		})
	}
}
