package shimserver

import (
	"fmt"
	"io"
	"net/http"
	"sync"
)

// InProcess is the RoundTripper that serves requests for host with handler,
// in this process, and sends every other request with next.
type InProcess struct {
	// Host is the host of the shim's URL.
	Host string
	// Handler answers the requests for Host.
	Handler http.Handler
	// Next sends every other request.
	Next http.RoundTripper
}

// RoundTrip runs the handler for req and returns its answer as soon as the
// handler has written its header; the body streams through a pipe.
func (t *InProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.Host {
		return t.Next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.RequestURI, r.RemoteAddr, r.Host = req.URL.RequestURI(), "in-process", t.Host
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // the handler wrote nothing
			pw.Close()
		}()
		t.Handler.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the http.ResponseWriter of an in-process request.
type pipeResponse struct {
	header http.Header
	sent   http.Header // the header as written
	status int
	body   *io.PipeWriter
	ready  chan struct{}
	once   sync.Once
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
