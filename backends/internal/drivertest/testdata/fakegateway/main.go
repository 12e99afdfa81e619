// Command fakegateway stands in for `hoist gateway` in the backends'
// tests: it takes the gateway's command line, answers the admin API's health
// check on the admin socket (mode 0600) with the bearer token of the token
// file, answers any request on the --http listener, and exits on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakegateway:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 || os.Args[1] != "gateway" {
		return errors.New("usage: hoist gateway --state-dir DIR --admin-socket PATH --token-file FILE --http ADDR --https ADDR")
	}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "")
	socket := fs.String("admin-socket", "", "")
	tokenFile := fs.String("token-file", "", "")
	httpAddr := fs.String("http", "", "")
	fs.String("https", "", "")
	if err := fs.Parse(os.Args[2:]); err != nil {
		return err
	}
	if *stateDir == "" || *socket == "" || *tokenFile == "" {
		return errors.New("--state-dir, --admin-socket and --token-file are required")
	}
	if err := os.MkdirAll(*stateDir, 0o700); err != nil {
		return err
	}
	b, err := os.ReadFile(*tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(b))
	_ = os.Remove(*socket)
	ln, err := net.Listen("unix", *socket)
	if err != nil {
		return err
	}
	if err := os.Chmod(*socket, 0o600); err != nil {
		return err
	}
	admin := http.NewServeMux()
	admin.HandleFunc("GET /api/healthcheck", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Hoist-Api-Version", "1")
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"service":"hoist-gateway","version":"fake","api_version":1}`)
	})
	srvs := []*http.Server{{Handler: admin, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = srvs[0].Serve(ln) }()
	if *httpAddr != "" {
		pl, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			return err
		}
		pub := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "fake gateway")
		})}
		srvs = append(srvs, pub)
		go func() { _ = pub.Serve(pl) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range srvs {
		_ = s.Shutdown(sctx)
	}
	return nil
}
