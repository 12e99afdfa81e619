package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
)

// fakeAgent answers like an agent of the given service and API version.
func fakeAgent(t *testing.T, service string, version int, header bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if header {
			w.Header().Set(api.APIVersionHeader, strconv.Itoa(version))
		}
		switch r.URL.Path {
		case api.HealthPath:
			_ = json.NewEncoder(w).Encode(api.Health{Service: service, Version: "x", APIVersion: version})
		case "/api/v1/tasks/missing":
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Message: "task missing: not found"})
		default:
			_ = json.NewEncoder(w).Encode(api.TaskInfo{ID: "t", Status: api.TaskRunning})
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClients_refuseIncompatibleAgents(t *testing.T) {
	tests := []struct {
		name    string
		service string
		version int
		header  bool
		ok      bool
	}{
		{"same version", api.ShimService, api.ShimAPIVersion, true, true},
		{"newer api version", api.ShimService, api.ShimAPIVersion + 1, true, false},
		{"older api version", api.ShimService, api.ShimAPIVersion - 1, true, false},
		{"no version header", api.ShimService, api.ShimAPIVersion, false, false},
		{"another service", api.RunnerService, api.ShimAPIVersion, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := api.NewShimClient(fakeAgent(t, tt.service, tt.version, tt.header), nil)
			_, herr := c.Health(t.Context())
			if got := herr == nil; got != tt.ok {
				t.Errorf("Health err = %v, want ok=%v", herr, tt.ok)
			}
			if !tt.ok && !errors.Is(herr, api.ErrIncompatibleAgent) {
				t.Errorf("Health err = %v, want ErrIncompatibleAgent", herr)
			}
			if tt.service != api.ShimService {
				return // the other calls only check the version header
			}
			_, gerr := c.GetTask(t.Context(), "t")
			if got := gerr == nil; got != tt.ok {
				t.Errorf("GetTask err = %v, want ok=%v", gerr, tt.ok)
			}
			if !tt.ok && !errors.Is(gerr, api.ErrIncompatibleAgent) {
				t.Errorf("GetTask err = %v, want ErrIncompatibleAgent", gerr)
			}
		})
	}
}

func TestClients_mapStatusToErrors(t *testing.T) {
	c := api.NewShimClient(fakeAgent(t, api.ShimService, api.ShimAPIVersion, true), nil)
	_, err := c.GetTask(t.Context(), "missing")
	if !errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrConflict) {
		t.Errorf("err = %v, want ErrNotFound only", err)
	}
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Message != "task missing: not found" {
		t.Errorf("err = %v, want the agent's message", err)
	}
}

func TestLogFrame_roundTrip(t *testing.T) {
	in := []api.LogLine{
		{Seq: 1, Time: time.Unix(1, 5).UTC(), Stream: api.StreamStdout, Data: []byte("hello\n")},
		{Seq: 2, Time: time.Unix(2, 0).UTC(), Stream: api.StreamStderr, Data: []byte{}},
		{Seq: 3, Time: time.Unix(3, 999).UTC(), Stream: api.StreamStderr, Data: bytes.Repeat([]byte("x"), 70000)},
	}
	var b []byte
	for _, l := range in {
		b = api.AppendFrame(b, l)
	}
	r := bufio.NewReader(bytes.NewReader(b))
	var out []api.LogLine
	for {
		l, err := api.ReadFrame(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	if _, err := api.ReadFrame(bufio.NewReader(bytes.NewReader(b[:len(b)-1]))); err != nil {
		t.Fatalf("first frame of a truncated stream: %v", err)
	}
	r = bufio.NewReader(bytes.NewReader(b[:len(b)-1]))
	var err error
	for err == nil {
		_, err = api.ReadFrame(r)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated stream: err = %v, want io.ErrUnexpectedEOF", err)
	}
}
