package api

import (
	"context"
	"net/http"
	"time"
)

// The gateway's admin API. `hoist gateway` (the hoist binary in gateway mode,
// run on a gateway instance) serves it on a loopback address of its
// instance; the server reaches it through the connection it holds to the
// instance (Conn.HTTPClient), never on a public port. Every request carries
// the gateway's admin token as a bearer token (Authorization), the health
// check included; every response carries GatewayAPIVersion in
// APIVersionHeader. Like dstack's gateway registry
// (src/dstack/_internal/proxy/gateway/routers/registry.py), but level
// triggered: the server puts the whole desired configuration, the gateway
// replaces what it serves with it and keeps it on disk, so it goes on
// serving its last configuration while the server is away or after a
// restart of its own.
//
//	GET  /api/healthcheck   Health (Service GatewayService)
//	PUT  /api/v1/config     GatewayConfig → GatewayStatus; 409 when Version is older than the one served
//	GET  /api/v1/status     GatewayStatus
//	GET  /api/v1/stats      GatewayStats
const (
	// GatewayAPIVersion is the version of the gateway's admin API.
	GatewayAPIVersion = 1
	// GatewayService is the service name the gateway reports in Health.
	GatewayService = "hoist-gateway"
)

// GatewayConfig is everything a gateway serves, put whole by the server.
type GatewayConfig struct {
	// Version orders configurations: the gateway refuses (409) one older
	// than the one it serves and ignores an equal one.
	Version int64 `json:"version"`
	// Domain is the gateway's wildcard domain without "*." (example.com
	// for *.example.com); services are served at <run>.<Domain> and
	// models at gateway.<Domain> (dstack's naming).
	Domain string `json:"domain"`
	// TLS says how the gateway gets certificates; nil serves plain HTTP
	// only (dstack's `certificate: null`, TLS at the user's own load
	// balancer).
	TLS *GatewayTLS `json:"tls,omitempty"`
	// Tokens are the hoist tokens accepted for services with Auth, as the
	// store keeps them: hex SHA-256 of the token, with their expiry.
	Tokens []GatewayToken `json:"tokens,omitempty"`
	// Services are the services routed through the gateway.
	Services []GatewayServiceConfig `json:"services,omitempty"`
}

// GatewayTLS is how a gateway gets its certificates: by ACME (one
// certificate per service domain, as dstack's certbot does) or a given
// certificate.
type GatewayTLS struct {
	// ACME, when set, gets certificates from an ACME server.
	ACME *GatewayACME `json:"acme,omitempty"`
	// CertPEM and KeyPEM are a given certificate (chain) and its key,
	// used for every domain it covers; ACME is not asked for those.
	CertPEM string `json:"cert_pem,omitempty"`
	KeyPEM  string `json:"key_pem,omitempty"`
}

// GatewayACME configures the ACME client (dstack's DSTACK_ACME_SERVER,
// DSTACK_ACME_EAB_KID, DSTACK_ACME_EAB_HMAC_KEY).
type GatewayACME struct {
	// DirectoryURL is the ACME directory; empty means Let's Encrypt's
	// production directory.
	DirectoryURL string `json:"directory_url,omitempty"`
	// CAPEM are extra roots trusted when talking to the ACME server (a
	// private ACME server's CA); empty means the system's roots.
	CAPEM string `json:"ca_pem,omitempty"`
	// Email is the account's contact; optional.
	Email string `json:"email,omitempty"`
	// EABKeyID and EABHMACKey bind the account to an external account
	// (base64url HMAC key), when the ACME server requires it.
	EABKeyID   string `json:"eab_kid,omitempty"`
	EABHMACKey string `json:"eab_hmac_key,omitempty"`
}

// GatewayToken is one accepted hoist token.
type GatewayToken struct {
	// SHA256 is the hex SHA-256 of the token.
	SHA256 string `json:"sha256"`
	// ExpiresAt is when it stops being accepted; zero means never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// GatewayServiceConfig is one service run served by a gateway (dstack's
// services/register, with its replicas).
type GatewayServiceConfig struct {
	// Project and Run name the run.
	Project string `json:"project"`
	Run     string `json:"run"`
	// Host is the service's host name, <run>.<domain>.
	Host string `json:"host"`
	// HTTPS serves the service over TLS (HTTP answers 301 to it); false
	// serves plain HTTP.
	HTTPS bool `json:"https"`
	// Auth requires a hoist token (Authorization: Bearer) of GatewayConfig.Tokens.
	Auth bool `json:"auth"`
	// Model is the service's `model`, nil when it has none; models are
	// also served at gateway.<domain>.
	Model *GatewayModel `json:"model,omitempty"`
	// RateLimits are the service's `rate_limits`.
	RateLimits []GatewayRateLimit `json:"rate_limits,omitempty"`
	// MinReplicas is the low end of `replicas`: 0 means the service scales
	// to zero and a request is held while the server starts a replica.
	MinReplicas int `json:"min_replicas"`
	// Replicas are the ready replicas.
	Replicas []GatewayReplica `json:"replicas,omitempty"`
}

// GatewayModel is a service's `model` (dstack's ModelInfo).
type GatewayModel struct {
	Name   string `json:"name"`
	Format string `json:"format"`
	// Prefix is an openai-format upstream's path prefix (default /v1).
	Prefix string `json:"prefix,omitempty"`
	// ChatTemplate and EOSToken are a tgi-format model's.
	ChatTemplate string `json:"chat_template,omitempty"`
	EOSToken     string `json:"eos_token,omitempty"`
}

// GatewayRateLimit is one of a service's `rate_limits`.
type GatewayRateLimit struct {
	Prefix string  `json:"prefix"`
	RPS    float64 `json:"rps"`
	Burst  int     `json:"burst,omitempty"`
	// Header keys the limit by this request header instead of the client
	// address; requests without it are not limited (as dstack's nginx).
	Header string `json:"header,omitempty"`
}

// GatewayReplica is one ready replica and how the gateway reaches it.
type GatewayReplica struct {
	// JobID is the replica's job.
	JobID string `json:"job_id"`
	// Addr is host:port of the service's port as seen from the replica's
	// host (usually 127.0.0.1:<published port>).
	Addr string `json:"addr"`
	// SSH, when set, is the replica's host: the gateway dials Addr through
	// an SSH connection to it. Nil means Addr is reachable from the
	// gateway's host directly (the replica runs on the same host).
	SSH *GatewaySSH `json:"ssh,omitempty"`
}

// GatewaySSH is how a gateway logs in to a replica's host.
type GatewaySSH struct {
	Hostname   string `json:"hostname"`
	Port       int    `json:"port,omitempty"`
	User       string `json:"user"`
	PrivateKey string `json:"private_key"`
	// HostKeys pin the host (authorized_keys format); at least one.
	HostKeys []string `json:"host_keys"`
	// ProxyJump is the host to jump through, if any.
	ProxyJump *GatewaySSH `json:"proxy_jump,omitempty"`
}

// GatewayStatus is what a gateway serves.
type GatewayStatus struct {
	// Version is the configuration served (0: none yet).
	Version int64 `json:"version"`
	// Certificates are the certificates the gateway holds, by host.
	Certificates []GatewayCertificate `json:"certificates,omitempty"`
	// Errors are per-host problems (a certificate ACME refused, a replica
	// host the gateway cannot log in to), for the server to show.
	Errors []GatewayError `json:"errors,omitempty"`
}

// GatewayCertificate is one certificate a gateway holds.
type GatewayCertificate struct {
	Host     string    `json:"host"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
}

// GatewayError is one problem of a host a gateway serves.
type GatewayError struct {
	Host    string `json:"host"`
	Message string `json:"message"`
}

// GatewayStats is the traffic a gateway measured, for autoscaling (dstack's
// /api/stats/collect): per service, requests per one-second frame over the
// last GatewayStatsWindow, counting requests past auth and rate limits,
// including those held or refused for want of a replica.
type GatewayStats struct {
	Services []GatewayServiceStats `json:"services,omitempty"`
}

// GatewayStatsWindow is how far back GatewayStats reaches.
const GatewayStatsWindow = 5 * time.Minute

// GatewayServiceStats is one service's traffic.
type GatewayServiceStats struct {
	Project string `json:"project"`
	Run     string `json:"run"`
	// Frames are (unix second, requests) pairs, oldest first, seconds
	// without requests left out.
	Frames []GatewayFrame `json:"frames,omitempty"`
	// LastRequest is when the last request arrived (zero: none since the
	// gateway started).
	LastRequest time.Time `json:"last_request,omitzero"`
	// Waiting is how many requests are held right now for want of a
	// ready replica (scale from zero).
	Waiting int `json:"waiting,omitempty"`
}

// GatewayFrame is the requests of one second.
type GatewayFrame struct {
	Unix     int64 `json:"t"`
	Requests int64 `json:"n"`
}

// GatewayClient talks to a gateway's admin API.
type GatewayClient struct{ c agentClient }

// NewGatewayClient returns a client of the gateway at baseURL (as seen from
// the gateway's instance) over hc, authenticated by token.
func NewGatewayClient(baseURL string, hc *http.Client, token string) *GatewayClient {
	c := newAgentClient(baseURL, hc, GatewayService, GatewayAPIVersion)
	c.token = token
	return &GatewayClient{c: c}
}

// Health asks the gateway's health check.
func (g *GatewayClient) Health(ctx context.Context) (Health, error) { return g.c.health(ctx) }

// PutConfig replaces what the gateway serves.
func (g *GatewayClient) PutConfig(ctx context.Context, cfg GatewayConfig) (GatewayStatus, error) {
	var st GatewayStatus
	err := g.c.do(ctx, http.MethodPut, "/api/v1/config", cfg, &st)
	return st, err
}

// Status returns what the gateway serves.
func (g *GatewayClient) Status(ctx context.Context) (GatewayStatus, error) {
	var st GatewayStatus
	err := g.c.do(ctx, http.MethodGet, "/api/v1/status", nil, &st)
	return st, err
}

// Stats returns the traffic the gateway measured.
func (g *GatewayClient) Stats(ctx context.Context) (GatewayStats, error) {
	var st GatewayStats
	err := g.c.do(ctx, http.MethodGet, "/api/v1/stats", nil, &st)
	return st, err
}
