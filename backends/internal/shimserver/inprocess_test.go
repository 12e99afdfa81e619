package shimserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// shimHost is the shim's host in these tests.
const shimHost = "shim.test.invalid"

func TestInProcess(t *testing.T) {
	released := make(chan struct{})
	handlerDone := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Id", r.PathValue("id"))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first ")
		<-released
		_, _ = io.WriteString(w, "second")
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		handlerDone <- r.Context().Err()
	})
	mux.HandleFunc("GET /silent", func(http.ResponseWriter, *http.Request) {})
	var forwarded []string
	hc := &http.Client{Transport: &InProcess{Host: shimHost, Handler: mux, Next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		forwarded = append(forwarded, r.URL.Host)
		return nil, errors.New("not in process")
	})}}

	t.Run("the handler's answer streams before it ends", func(t *testing.T) {
		resp, err := hc.Get("http://" + shimHost + "/stream/7")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Id") != "7" {
			t.Errorf("answer %d %v", resp.StatusCode, resp.Header)
		}
		buf := make([]byte, len("first "))
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first " {
			t.Fatalf("first part %q, %v", buf, err)
		}
		close(released)
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "second" {
			t.Errorf("rest %q, %v", rest, err)
		}
	})
	t.Run("a handler that writes nothing answers 200 and no body", func(t *testing.T) {
		resp, err := hc.Get("http://" + shimHost + "/silent")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("answer %d %q", resp.StatusCode, b)
		}
	})
	t.Run("a canceled request ends the handler's context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+shimHost+"/slow", nil)
		if _, err := hc.Do(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do = %v, want the deadline", err)
		}
		select {
		case err := <-handlerDone:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("handler context ended with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the handler still runs")
		}
	})
	t.Run("other hosts go to the next transport", func(t *testing.T) {
		_, err := hc.Get("http://elsewhere.invalid:10999/api/healthcheck")
		if err == nil || !strings.Contains(err.Error(), "not in process") || len(forwarded) != 1 {
			t.Errorf("Get = %v, forwarded %v", err, forwarded)
		}
	})
}
