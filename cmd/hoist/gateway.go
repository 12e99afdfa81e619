package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"hoist/agents/api"
	"hoist/backends/tunnel"
	"hoist/web"
)

// gatewayProgram is the program name under which this binary runs the
// gateway directly (like hoist-shim and hoist-runner).
const gatewayProgram = "hoist-gateway"

// gatewayDrain bounds how long the gateway waits for requests in flight
// after SIGTERM.
const gatewayDrain = 10 * time.Second

// gatewayOptions are the flags of `hoist gateway`.
type gatewayOptions struct {
	stateDir, adminSocket, tokenFile, http, https string
}

func newGatewayCmd() *cobra.Command {
	var o gatewayOptions
	var showVersion bool
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway: services at <run>.<domain> with TLS, configured by the server",
		Long: `Run hoist's gateway (dstack's gateway) on a gateway instance. It serves
each service routed through it at https://<run>.<domain>/ and the models at
https://gateway.<domain>/, with certificates from ACME, as the server
configures it over the admin API on --admin-socket. It keeps its last
configuration under --state-dir and serves it after a restart while the
server is away. It logs JSON to stderr and drains on SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Fprintln(cmd.OutOrStdout(), gatewayProgram, version)
				return nil
			}
			return runGateway(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.stateDir, "state-dir", "", "directory of the saved configuration, the ACME account and the certificates (required)")
	f.StringVar(&o.adminSocket, "admin-socket", "", "Unix socket of the admin API, mode 0600 (required)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the admin API's bearer token (required)")
	f.StringVar(&o.http, "http", ":80", `public HTTP listen address; "" disables it`)
	f.StringVar(&o.https, "https", ":443", `public HTTPS listen address; "" disables it`)
	f.BoolVar(&showVersion, "version", false, "print the version and exit")
	return cmd
}

// runGatewayArgs runs the gateway when the binary was invoked as
// hoist-gateway, stopping on SIGTERM or an interrupt.
func runGatewayArgs(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := newGatewayCmd()
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.ExecuteContext(ctx)
}

// runGateway serves until ctx ends, then drains within gatewayDrain.
func runGateway(ctx context.Context, o gatewayOptions, stderr io.Writer) error {
	if o.stateDir == "" || o.adminSocket == "" || o.tokenFile == "" {
		return errors.New("gateway: --state-dir, --admin-socket and --token-file are required")
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("component", "gateway")
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return fmt.Errorf("gateway: read token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return fmt.Errorf("gateway: token file %s is empty", o.tokenFile)
	}
	if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
		return fmt.Errorf("gateway: state dir: %w", err)
	}
	httpsPort := 443
	if o.https != "" {
		_, p, err := net.SplitHostPort(o.https)
		if err != nil {
			return fmt.Errorf("gateway: --https %q: %w", o.https, err)
		}
		if httpsPort, err = strconv.Atoi(p); err != nil {
			return fmt.Errorf("gateway: --https %q: %w", o.https, err)
		}
	}
	pool := &sshPool{log: log, m: map[string]*tunnel.Client{}}
	defer pool.close()
	web.GatewayVersion = version
	g, err := web.NewGatewayServer(web.GatewayServerOptions{
		StateDir: o.stateDir, AdminToken: token, HTTPSPort: httpsPort, DialSSH: pool.dial, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer g.Close()

	// The admin socket: a stale one of a previous run is replaced; the
	// socket is the owner's only.
	_ = os.Remove(o.adminSocket)
	if err := os.MkdirAll(filepath.Dir(o.adminSocket), 0o700); err != nil {
		return fmt.Errorf("gateway: admin socket dir: %w", err)
	}
	aln, err := net.Listen("unix", o.adminSocket)
	if err != nil {
		return fmt.Errorf("gateway: admin socket: %w", err)
	}
	if err := os.Chmod(o.adminSocket, 0o600); err != nil {
		aln.Close()
		return fmt.Errorf("gateway: admin socket: %w", err)
	}
	type served struct {
		srv *http.Server
		ln  net.Listener
	}
	all := []served{{g.HTTPServer(g.AdminHandler()), aln}}
	if o.http != "" {
		ln, err := net.Listen("tcp", o.http)
		if err != nil {
			aln.Close()
			return fmt.Errorf("gateway: listen http: %w", err)
		}
		all = append(all, served{g.HTTPServer(g.PublicHandler()), ln})
	}
	if o.https != "" {
		ln, err := net.Listen("tcp", o.https)
		if err != nil {
			for _, s := range all {
				s.ln.Close()
			}
			return fmt.Errorf("gateway: listen https: %w", err)
		}
		hs := g.HTTPServer(g.PublicHandler())
		hs.TLSConfig = g.TLSConfig()
		all = append(all, served{hs, tls.NewListener(ln, hs.TLSConfig)})
	}
	log.Info("gateway_started", "pid", os.Getpid(), "admin_socket", o.adminSocket, "http", o.http, "https", o.https, "version", version)

	eg, ectx := errgroup.WithContext(ctx)
	for _, s := range all {
		eg.Go(func() error {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("gateway: serve %s: %w", s.ln.Addr(), err)
			}
			return nil
		})
	}
	eg.Go(func() error {
		<-ectx.Done()
		log.Info("gateway_draining")
		sctx, cancel := context.WithTimeout(context.Background(), gatewayDrain)
		defer cancel()
		var wg sync.WaitGroup
		for _, s := range all {
			wg.Go(func() {
				if err := s.srv.Shutdown(sctx); err != nil {
					s.srv.Close() // held requests and streams past the bound
				}
			})
		}
		wg.Wait()
		return nil
	})
	err = eg.Wait()
	_ = os.Remove(o.adminSocket)
	log.Info("gateway_stopped")
	return err
}

// sshPool keeps one SSH connection per replica host (channels multiplex),
// dialing again when one died; a connection unused for sshIdle is closed
// at the next dial (its host left the configuration).
type sshPool struct {
	log  *slog.Logger
	mu   sync.Mutex
	m    map[string]*tunnel.Client
	used map[string]time.Time
}

// sshIdle is how long the pool keeps a connection no request used.
const sshIdle = 10 * time.Minute

// dial connects to addr as seen from host, through the pool's connection
// to host.
func (p *sshPool) dial(ctx context.Context, host api.GatewaySSH, addr string) (net.Conn, error) {
	c, err := p.client(ctx, host)
	if err != nil {
		return nil, err
	}
	return c.DialContext(ctx, "tcp", addr)
}

func (p *sshPool) client(ctx context.Context, host api.GatewaySSH) (*tunnel.Client, error) {
	key := poolKey(host)
	now := time.Now()
	p.mu.Lock()
	if p.used == nil {
		p.used = map[string]time.Time{}
	}
	for k, c := range p.m {
		if k != key && now.Sub(p.used[k]) > sshIdle {
			c.Close()
			delete(p.m, k)
			delete(p.used, k)
		}
	}
	p.used[key] = now
	c := p.m[key]
	p.mu.Unlock()
	if c != nil && c.Alive() {
		return c, nil
	}
	cfg, err := tunnelConfig(host, p.log)
	if err != nil {
		return nil, err
	}
	nc, err := tunnel.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh to %s: %w", cfg.Addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.m[key]; c != nil && c.Alive() {
		nc.Close() // another request dialed first
		return c, nil
	}
	if c != nil {
		c.Close()
	}
	p.m[key] = nc
	return nc, nil
}

func (p *sshPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.m {
		c.Close()
		delete(p.m, k)
	}
}

// poolKey identifies a login: user, address, key and pins, jump hosts
// included.
func poolKey(h api.GatewaySSH) string {
	var b strings.Builder
	for p := &h; p != nil; p = p.ProxyJump {
		sum := sha256.Sum256([]byte(p.PrivateKey + "\x00" + strings.Join(p.HostKeys, "\x00")))
		fmt.Fprintf(&b, "%s@%s/%x;", p.User, tunnel.HostPort(p.Hostname, p.Port), sum[:8])
	}
	return b.String()
}

// tunnelConfig turns a replica host's login into the tunnel's: its host
// keys pinned, no trust on first use.
func tunnelConfig(h api.GatewaySSH, log *slog.Logger) (tunnel.Config, error) {
	signer, err := ssh.ParsePrivateKey([]byte(h.PrivateKey))
	if err != nil {
		return tunnel.Config{}, fmt.Errorf("ssh key of %s: %w", h.Hostname, err)
	}
	keys, err := tunnel.ParseHostKeys(h.HostKeys)
	if err != nil {
		return tunnel.Config{}, fmt.Errorf("host keys of %s: %w", h.Hostname, err)
	}
	if len(keys) == 0 {
		return tunnel.Config{}, fmt.Errorf("host %s has no pinned host key", h.Hostname)
	}
	cfg := tunnel.Config{Addr: tunnel.HostPort(h.Hostname, h.Port), User: h.User, Signers: []ssh.Signer{signer}, HostKeys: keys, Logger: log}
	if h.ProxyJump != nil {
		j, err := tunnelConfig(*h.ProxyJump, log)
		if err != nil {
			return tunnel.Config{}, fmt.Errorf("proxy jump: %w", err)
		}
		cfg.Jump = &j
	}
	return cfg, nil
}
