package reconciler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/reconciler/support"
	"hoist/schema"
	"hoist/store"
)

// GatewaySettings are the server's `gateways:` settings: how its gateways
// get certificates (dstack's DSTACK_ACME_SERVER, DSTACK_ACME_EAB_KID and
// DSTACK_ACME_EAB_HMAC_KEY, src/dstack/_internal/server/settings.py).
type GatewaySettings struct {
	// ACME is the ACME server gateways with `certificate: {type:
	// lets-encrypt}` get certificates from; nil means Let's Encrypt's
	// production directory with no account settings.
	ACME *api.GatewayACME
	// Certificates are given certificates; a gateway whose domain one of
	// them covers (its leaf is valid for gateway.<domain>) serves it
	// instead of asking ACME.
	Certificates []GatewayCertificate
	// AdminTokenSHA256 is the hex SHA-256 of the server's bootstrap admin
	// token (HOIST_ADMIN_TOKEN), which authenticates to the server and
	// its proxy outside the store's tokens, and so at gateways too; empty
	// for none.
	AdminTokenSHA256 string
}

// A GatewayCertificate is a given certificate (chain) and its key, PEM.
type GatewayCertificate struct {
	CertPEM, KeyPEM string
}

// Gateway timing.
const (
	// gatewaySyncInterval is how often a running gateway's configuration is
	// compared with what it serves (level-triggered, as dstack's
	// gateway_replicas pipeline) and its stats are pulled.
	gatewaySyncInterval = 2 * time.Second
	// gatewayProvisioningTimeout bounds how long a gateway may take to come
	// up before it fails (dstack's gateway provisioning timeout).
	gatewayProvisioningTimeout = 10 * time.Minute
	// gatewayWakeWindow is how recent a request to a service at zero
	// replicas must be for the gateway's stats to wake it.
	gatewayWakeWindow = 10 * time.Second
)

// reasonGatewayError ends a replica a gateway cannot reach (dstack's
// JobTerminationReason.GATEWAY_ERROR).
const reasonGatewayError = "gateway_error"

func (c *Controller) applyGateway(ctx context.Context, rev source.Revision, s plan.Step) error {
	g, err := c.st.GetGatewayByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete || s.Action == plan.Replace {
		if exists {
			g.Deleted, g.RemovedFromGit = true, true
			if err := c.st.UpdateGateway(ctx, &g); err != nil {
				return err
			}
			c.event(ctx, "gateway", g.Name, g.ID, "deleted", rev.ID, "gateway deleted")
			c.gws.Add(g.ID) // stops the gateway and terminates its instance
		}
		if s.Action == plan.Delete {
			return nil
		}
		exists = false
	}
	spec := s.Desired.Spec.(*schema.Gateway)
	if !exists {
		g = store.Gateway{Project: c.cfg.Project, Name: s.Name, Status: store.GatewaySubmitted}
	}
	g.Spec, g.SpecHash, g.Revision, g.Backend, g.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, spec.Region
	g.OwnershipTags = c.tags(schema.KindGateway, g.Name, "")
	if exists {
		err = c.st.UpdateGateway(ctx, &g)
	} else {
		err = c.st.CreateGateway(ctx, &g)
		if err == nil {
			c.event(ctx, "gateway", g.Name, g.ID, g.Status, rev.ID, "gateway submitted")
		}
	}
	if err != nil {
		return err
	}
	c.gws.Add(g.ID)
	return nil
}

// reconcileGateway drives one gateway: submitted → provisioning (its
// instance created and the gateway started on it) → running (its
// configuration kept in line with the services it serves) or failed; a
// deleted gateway is stopped and its instance terminated (dstack's
// GatewayStatus, src/dstack/_internal/server/background/pipeline_tasks/gateways.py).
func (c *Controller) reconcileGateway(ctx context.Context, id string) (time.Duration, error) {
	l, ok, err := c.claim(ctx, "gateways", id)
	if err != nil || !ok {
		return 0, err
	}
	defer c.release(l)
	ctx, stopKeep := c.keepAlive(ctx, l)
	defer stopKeep()
	g, err := c.st.GetGateway(ctx, id)
	if err != nil {
		return 0, err
	}
	if g.Deleted || g.Status == store.GatewayFailed {
		return c.teardownGateway(ctx, l, &g)
	}
	gh, ok := c.bes[g.Backend].(backends.GatewayHost)
	if !ok {
		// Validation refuses such a gateway; a backend removed from the
		// server's configuration since is what is left.
		return 0, c.failGateway(ctx, l, &g, fmt.Sprintf("backend %q is not configured or has no gateways", g.Backend))
	}
	var spec schema.Gateway
	if err := json.Unmarshal(g.Spec, &spec); err != nil {
		return 0, c.failGateway(ctx, l, &g, "decode gateway spec: "+err.Error())
	}
	switch g.Status {
	case store.GatewaySubmitted, store.GatewayProvisioning:
		return c.provisionGateway(ctx, l, &g, gh, &spec)
	case store.GatewayRunning:
		return c.syncGateway(ctx, l, &g, gh, &spec)
	}
	return 0, nil
}

// provisionGateway creates the gateway's instance (its id persisted first),
// waits for it, starts the gateway on it with a fresh admin token, and
// marks the gateway running once its admin API answers.
func (c *Controller) provisionGateway(ctx context.Context, l store.Lease, g *store.Gateway, gh backends.GatewayHost, spec *schema.Gateway) (time.Duration, error) {
	if g.Status == store.GatewayProvisioning && c.now().Sub(g.CreatedAt) > gatewayProvisioningTimeout {
		return 0, c.failGateway(ctx, l, g, fmt.Sprintf("the gateway did not become ready within %s", gatewayProvisioningTimeout))
	}
	var offer offers.Offer
	if g.InstanceID == "" {
		o, err := c.gatewayOffer(ctx, gh, spec)
		if err != nil {
			if backends.KindOf(err) == backends.KindStalled {
				return 0, c.failGateway(ctx, l, g, err.Error())
			}
			return 0, err
		}
		b, _ := json.Marshal(o)
		g.InstanceID, g.BackendData = uuid.Must(uuid.NewV7()).String(), b
		g.Status, g.StatusMessage = store.GatewayProvisioning, ""
		if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
			return 0, err
		}
		c.event(ctx, "gateway", g.Name, g.ID, g.Status, g.Revision, fmt.Sprintf("gateway provisioning on %s (%s, %s)", g.Backend, o.Instance, o.Region))
	}
	_ = json.Unmarshal(g.BackendData, &offer)
	tags := map[string]string{}
	for k, v := range spec.Tags {
		tags[k] = v
	}
	for k, v := range g.OwnershipTags {
		tags[k] = v
	}
	tags[backends.TagInstance] = g.InstanceID
	bi, err := gh.Create(ctx, backends.InstanceSpec{ID: g.InstanceID, Name: "gateway-" + g.Name, Offer: offer, Tags: tags, Gateway: true})
	switch {
	case errors.Is(err, backends.ErrNoCapacity) || backends.IsStalled(err):
		return 0, c.failGateway(ctx, l, g, "create the gateway's instance: "+err.Error())
	case err != nil:
		c.noteGateway(ctx, l, g, "create the gateway's instance: "+err.Error())
		return 0, err
	case bi.Status == backends.StatusTerminated:
		return 0, c.failGateway(ctx, l, g, "the gateway's instance was gone before it became ready "+bi.Message)
	case bi.Status != backends.StatusRunning:
		return 2 * time.Second, nil
	}
	if g.AdminToken == "" {
		var raw [32]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return 0, err
		}
		if err := c.st.SealGatewayToken(g, base64.RawURLEncoding.EncodeToString(raw[:])); err != nil {
			return 0, c.failGateway(ctx, l, g, "seal the gateway's admin token: "+err.Error())
		}
		if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
			return 0, err
		}
	}
	token, err := c.st.GatewayToken(*g)
	if err != nil {
		return 0, c.failGateway(ctx, l, g, err.Error())
	}
	ep, err := gh.StartGateway(ctx, bi, backends.GatewayProcess{Token: token})
	if err != nil {
		if backends.IsStalled(err) {
			return 0, c.failGateway(ctx, l, g, "start the gateway: "+err.Error())
		}
		c.noteGateway(ctx, l, g, "start the gateway: "+err.Error())
		return 0, err
	}
	g.AdminURL = ep.AdminURL
	cl, err := c.gatewayClient(ctx, g, bi)
	if err != nil {
		c.noteGateway(ctx, l, g, err.Error())
		return 0, backends.Wait(err, 2*time.Second)
	}
	if _, err := cl.Health(ctx); err != nil {
		c.noteGateway(ctx, l, g, "gateway health check: "+err.Error())
		return 0, backends.Wait(fmt.Errorf("gateway %s health check: %w", g.Name, err), 2*time.Second)
	}
	g.Status, g.StatusMessage = store.GatewayRunning, ""
	g.IPAddress, g.Hostname = ep.PublicAddr, bi.Hostname
	g.HTTPPort, g.HTTPSPort = ep.HTTPPort, ep.HTTPSPort
	if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
		return 0, err
	}
	c.event(ctx, "gateway", g.Name, g.ID, g.Status, g.Revision, "gateway running at "+ep.PublicAddr)
	return c.syncGateway(ctx, l, g, gh, spec)
}

// gatewayOffer picks the offer of the gateway's instance in its backend
// and region: its instance_type when given, else the smallest CPU-only
// on-demand offer (dstack provisions a small VM; on the local backend the
// smallest slice of the host).
func (c *Controller) gatewayOffer(ctx context.Context, be backends.Backend, spec *schema.Gateway) (offers.Offer, error) {
	q := offers.Query{Regions: []string{spec.Region}}
	if spec.InstanceType != "" {
		q.InstanceTypes = []string{spec.InstanceType}
	}
	all, err := be.Offers(ctx, q)
	if err != nil {
		return offers.Offer{}, fmt.Errorf("gateway offers of %s: %w", be.Name(), err)
	}
	var fit []offers.Offer
	for _, o := range all {
		if o.Spot || !strings.EqualFold(o.Region, spec.Region) {
			continue
		}
		if spec.InstanceType != "" && !strings.EqualFold(o.Instance, spec.InstanceType) {
			continue
		}
		if spec.InstanceType == "" && o.GPUCount > 0 {
			continue
		}
		o.Backend = be.Name()
		fit = append(fit, o)
	}
	if len(fit) == 0 {
		what := "a CPU instance"
		if spec.InstanceType != "" {
			what = "instance type " + spec.InstanceType
		}
		return offers.Offer{}, backends.Stalled(fmt.Errorf("no offer of %s in region %s of backend %s", what, spec.Region, be.Name()))
	}
	slices.SortStableFunc(fit, func(a, b offers.Offer) int {
		switch {
		case a.CPUs != b.CPUs:
			return a.CPUs - b.CPUs
		case a.MemoryGB != b.MemoryGB:
			if a.MemoryGB < b.MemoryGB {
				return -1
			}
			return 1
		case a.Price < b.Price:
			return -1
		case a.Price > b.Price:
			return 1
		}
		return 0
	})
	return fit[0], nil
}

// gatewayInstance is the backends view of a gateway's instance.
func gatewayInstance(g *store.Gateway) backends.Instance {
	return backends.Instance{ID: g.InstanceID, Backend: g.Backend, Region: g.Region, Hostname: g.Hostname, Tags: g.OwnershipTags}
}

// gatewayClient returns a client of the gateway's admin API through the
// connection the server holds to its instance (one per instance, like the
// shims').
func (c *Controller) gatewayClient(ctx context.Context, g *store.Gateway, bi backends.Instance) (*api.GatewayClient, error) {
	token, err := c.st.GatewayToken(*g)
	if err != nil {
		return nil, err
	}
	c.connsMu.Lock()
	conn, ok := c.conns[g.InstanceID]
	c.connsMu.Unlock()
	if !ok {
		cn, ok := c.bes[g.Backend].(backends.Connector)
		if !ok {
			return nil, backends.Stalled(fmt.Errorf("backend %q cannot connect to its instances", g.Backend))
		}
		conn, err = cn.Connect(ctx, bi)
		if err != nil {
			return nil, fmt.Errorf("connect to gateway %s: %w", g.Name, err)
		}
		c.connsMu.Lock()
		if prev, ok := c.conns[g.InstanceID]; ok {
			_ = conn.Close()
			conn = prev
		} else {
			c.conns[g.InstanceID] = conn
		}
		c.connsMu.Unlock()
	}
	return api.NewGatewayClient(g.AdminURL, conn.HTTPClient(), token), nil
}

// noteGateway records why a gateway is not there yet, without failing it.
func (c *Controller) noteGateway(ctx context.Context, l store.Lease, g *store.Gateway, msg string) {
	if g.StatusMessage == msg {
		return
	}
	g.StatusMessage = msg
	if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
		c.log.Warn("update gateway failed", "gateway", g.Name, "error", err)
	}
}

// failGateway marks a gateway failed with msg (dstack's failed status and
// status_message); the next pass stops it and terminates its instance.
func (c *Controller) failGateway(ctx context.Context, l store.Lease, g *store.Gateway, msg string) error {
	g.Status, g.StatusMessage = store.GatewayFailed, msg
	if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
		return err
	}
	c.event(ctx, "gateway", g.Name, g.ID, g.Status, g.Revision, "gateway failed: "+msg)
	if g.InstanceID != "" {
		c.gws.AddAfter(g.ID, time.Millisecond)
	}
	return nil
}

// teardownGateway stops a deleted or failed gateway and terminates its
// instance; the instance id is cleared once the backend let it go.
func (c *Controller) teardownGateway(ctx context.Context, l store.Lease, g *store.Gateway) (time.Duration, error) {
	c.forgetGatewayStats(g.ID)
	if g.InstanceID == "" {
		return 0, nil
	}
	be, ok := c.bes[g.Backend]
	if !ok {
		return 0, backends.Stalled(fmt.Errorf("gateway %s: backend %q is not configured", g.Name, g.Backend))
	}
	if gh, ok := be.(backends.GatewayHost); ok && g.AdminURL != "" {
		if err := gh.StopGateway(ctx, gatewayInstance(g)); err != nil {
			// The instance goes anyway; its termination stops the gateway.
			c.log.Warn("stop gateway failed", "gateway", g.Name, "error", err)
		}
	}
	if err := be.Terminate(ctx, g.InstanceID); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return 0, fmt.Errorf("terminate gateway %s instance: %w", g.Name, err)
	}
	c.dropConn(g.InstanceID)
	inst := g.InstanceID
	g.InstanceID, g.AdminURL = "", ""
	if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
		return 0, err
	}
	c.event(ctx, "gateway", g.Name, g.ID, "terminated", g.Revision, "gateway instance "+inst+" terminated")
	return 0, nil
}

// syncGateway puts the gateway's desired configuration when it differs
// from what the gateway serves, fails the replicas it cannot reach, and
// pulls its traffic for the autoscaler.
func (c *Controller) syncGateway(ctx context.Context, l store.Lease, g *store.Gateway, gh backends.GatewayHost, spec *schema.Gateway) (time.Duration, error) {
	cl, err := c.gatewayClient(ctx, g, gatewayInstance(g))
	if err != nil {
		if gatewayGone(ctx, gh, g) {
			return 0, c.failGateway(ctx, l, g, "the gateway's instance is gone")
		}
		c.noteGateway(ctx, l, g, err.Error())
		return 0, backends.Wait(err, gatewaySyncInterval)
	}
	want, err := c.gatewayConfig(ctx, g, spec)
	if err != nil {
		return 0, err
	}
	for _, u := range want.unreachable {
		if err := c.terminateJob(ctx, u.job.ID, reasonGatewayError, u.msg); err != nil {
			c.log.Warn("terminate job failed", "job", u.job.JobName, "error", err)
			continue
		}
		c.event(ctx, "job", u.job.JobName, u.job.ID, "terminating", "", u.msg)
		c.runs.Add(u.job.RunID)
	}
	b, _ := json.Marshal(want.cfg)
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	st, err := cl.Status(ctx)
	if err != nil {
		// Gone at the provider: the gateway failed (it is replaced when its
		// spec changes, as dstack's). Otherwise it serves on from its last
		// configuration while it cannot be reached.
		if gatewayGone(ctx, gh, g) {
			return 0, c.failGateway(ctx, l, g, "the gateway's instance is gone")
		}
		c.noteGateway(ctx, l, g, "gateway unreachable: "+err.Error())
		c.dropConn(g.InstanceID)
		c.restartGateway(ctx, l, g, gh)
		return 0, backends.Wait(fmt.Errorf("gateway %s status: %w", g.Name, err), gatewaySyncInterval)
	}
	changed := false
	if hash != g.ConfigHash || st.Version != g.ConfigVersion {
		changed = true
		cfg := want.cfg
		cfg.Version = max(g.ConfigVersion, st.Version) + 1
		if st, err = cl.PutConfig(ctx, cfg); err != nil {
			c.noteGateway(ctx, l, g, "put gateway configuration: "+err.Error())
			return 0, backends.Wait(fmt.Errorf("gateway %s put config: %w", g.Name, err), gatewaySyncInterval)
		}
		g.ConfigVersion, g.ConfigHash = cfg.Version, hash
		c.log.Info("gateway configured", "gateway", g.Name, "version", cfg.Version, "services", len(cfg.Services))
	}
	msg := ""
	for _, e := range st.Errors {
		msg += e.Host + ": " + e.Message + "; "
	}
	if msg = strings.TrimSuffix(msg, "; "); msg != g.StatusMessage {
		g.StatusMessage, changed = msg, true
	}
	if changed {
		if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
			return 0, err
		}
	}
	if want.metered {
		c.pullGatewayStats(ctx, g, cl, want.cfg.Services)
	}
	return gatewaySyncInterval, nil
}

// restartGateway asks the backend to start the gateway again on its
// instance when the instance answers but the gateway does not (StartGateway
// leaves a running gateway alone); the next pass checks it.
func (c *Controller) restartGateway(ctx context.Context, l store.Lease, g *store.Gateway, gh backends.GatewayHost) {
	bi, err := gh.Describe(ctx, g.InstanceID)
	if err != nil || bi.Unreachable || bi.Status != backends.StatusRunning {
		return
	}
	token, err := c.st.GatewayToken(*g)
	if err != nil {
		return
	}
	ep, err := gh.StartGateway(ctx, bi, backends.GatewayProcess{Token: token})
	if err != nil {
		c.log.Warn("restart gateway failed", "gateway", g.Name, "error", err)
		return
	}
	if ep.AdminURL != g.AdminURL || ep.PublicAddr != g.IPAddress || ep.HTTPPort != g.HTTPPort || ep.HTTPSPort != g.HTTPSPort {
		g.AdminURL, g.IPAddress = ep.AdminURL, ep.PublicAddr
		g.HTTPPort, g.HTTPSPort = ep.HTTPPort, ep.HTTPSPort
		if err := c.st.UpdateGatewayLeased(ctx, l, g); err != nil {
			c.log.Warn("update gateway failed", "gateway", g.Name, "error", err)
		}
	}
}

// gatewayGone reports whether the provider no longer has g's instance.
func gatewayGone(ctx context.Context, be backends.Backend, g *store.Gateway) bool {
	bi, err := be.Describe(ctx, g.InstanceID)
	return errors.Is(err, backends.ErrNotFound) || (err == nil && bi.Status == backends.StatusTerminated)
}

// gatewayDomain is the gateway's domain as services are served under it:
// `*.` stripped and `${{ run.project_name }}` interpolated (dstack's
// src/dstack/_internal/server/services/gateways/__init__.py).
func gatewayDomain(domain, project string) string {
	d := gatewayDomainVarRE.ReplaceAllStringFunc(domain, func(string) string { return project })
	return strings.TrimPrefix(d, "*.")
}

// gatewayDomainVarRE matches `${{ ... }}` in a gateway's domain; the
// schema admits only run.project_name there.
var gatewayDomainVarRE = regexp.MustCompile(`\$\{\{\s*[^}]*?\s*\}\}`)

// desiredGateway is a gateway's desired configuration and what building
// it found.
type desiredGateway struct {
	cfg api.GatewayConfig
	// unreachable are the ready replicas the gateway cannot reach.
	unreachable []unreachableReplica
	// metered is set when a service it serves follows its traffic.
	metered bool
}

type unreachableReplica struct {
	job store.Job
	msg string
}

// gatewayConfig builds what gateway g should serve: its domain and TLS,
// the accepted tokens, and the service runs routed through it with their
// ready replicas.
func (c *Controller) gatewayConfig(ctx context.Context, g *store.Gateway, spec *schema.Gateway) (desiredGateway, error) {
	var d desiredGateway
	d.cfg.Domain = gatewayDomain(spec.Domain, g.Project)
	d.cfg.TLS = c.gatewayTLS(spec, d.cfg.Domain)
	toks, err := c.st.ValidTokens(ctx, g.Project)
	if err != nil {
		return d, err
	}
	if h := c.cfg.Gateways.AdminTokenSHA256; h != "" {
		d.cfg.Tokens = append(d.cfg.Tokens, api.GatewayToken{SHA256: h})
	}
	for _, t := range toks {
		d.cfg.Tokens = append(d.cfg.Tokens, api.GatewayToken{SHA256: t.TokenHash, ExpiresAt: t.ExpiresAt})
	}
	routes, err := c.gatewayServices(ctx, g.Name, g.Project)
	if err != nil {
		return d, err
	}
	for _, r := range routes {
		sc := api.GatewayServiceConfig{
			Project: r.newest.Project, Run: r.newest.Name,
			Host:  r.newest.Name + "." + d.cfg.Domain,
			HTTPS: serviceHTTPS(r.spec.HTTPS, d.cfg.TLS != nil),
			Auth:  r.spec.Auth, MinReplicas: r.spec.minReplicas(),
		}
		if m := r.spec.Model; m != nil {
			sc.Model = &api.GatewayModel{Name: m.Name, Format: m.Format, Prefix: m.Prefix, ChatTemplate: m.ChatTemplate, EOSToken: m.EOSToken}
		}
		for _, rl := range r.spec.RateLimits {
			grl := api.GatewayRateLimit{Prefix: rl.Prefix, RPS: rl.RPS, Burst: int(rl.Burst)}
			if rl.Key.Type == "header" {
				grl.Header = rl.Key.Header
			}
			sc.RateLimits = append(sc.RateLimits, grl)
		}
		if r.spec.scales() || sc.MinReplicas == 0 {
			d.metered = true
		}
		for _, rj := range r.jobs {
			rep, msg, ok := c.gatewayReplica(ctx, g, rj.job, rj.spec)
			switch {
			case ok:
				sc.Replicas = append(sc.Replicas, rep)
			case msg != "":
				d.unreachable = append(d.unreachable, unreachableReplica{job: rj.job, msg: msg})
			}
		}
		d.cfg.Services = append(d.cfg.Services, sc)
	}
	return d, nil
}

// serviceHTTPS says whether a service is served over TLS: `https` true or
// false, or auto (TLS iff the gateway has a certificate), as dstack's
// src/dstack/_internal/server/services/services/__init__.py.
func serviceHTTPS(https string, hasTLS bool) bool {
	switch https {
	case "false":
		return false
	case "auto":
		return hasTLS
	}
	return true
}

// gatewayTLS is how gateway spec gets certificates: none for
// `certificate: null`, a given certificate covering the domain, or ACME.
func (c *Controller) gatewayTLS(spec *schema.Gateway, domain string) *api.GatewayTLS {
	if spec.Certificate == nil {
		return nil
	}
	for _, cert := range c.cfg.Gateways.Certificates {
		if certCovers(cert.CertPEM, "gateway."+domain) {
			return &api.GatewayTLS{CertPEM: cert.CertPEM, KeyPEM: cert.KeyPEM}
		}
	}
	acme := api.GatewayACME{}
	if c.cfg.Gateways.ACME != nil {
		acme = *c.cfg.Gateways.ACME
	}
	return &api.GatewayTLS{ACME: &acme}
}

// gatewayRun is one service served by a gateway: its newest active run
// and the latest jobs of every active run of its name.
type gatewayRun struct {
	newest store.Run
	spec   runSpec
	jobs   []gatewayJob
}

type gatewayJob struct {
	job  store.Job
	spec runSpec
}

// gatewayServices returns the active service runs routed through gateway
// name: those naming it in `gateway`, and, when it is the default
// gateway, those with `gateway` unset or true (dstack's register_service).
func (c *Controller) gatewayServices(ctx context.Context, name, project string) ([]gatewayRun, error) {
	isDefault, err := c.isDefaultGateway(ctx, name)
	if err != nil {
		return nil, err
	}
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: project, Type: string(schema.KindService), Active: true, Limit: 100000})
	if err != nil {
		return nil, fmt.Errorf("gateway %s services: %w", name, err)
	}
	byName := map[string]*gatewayRun{}
	var order []string
	for _, r := range runs {
		if r.Status == store.RunPending {
			continue
		}
		spec, err := decodeRunSpec(r.Spec)
		if err != nil || !servedBy(spec.Gateway, name, isDefault) {
			continue
		}
		gr, ok := byName[r.Name]
		if !ok || r.CreatedAt.After(gr.newest.CreatedAt) {
			if !ok {
				gr = &gatewayRun{}
				byName[r.Name] = gr
				order = append(order, r.Name)
			}
			gr.newest, gr.spec = r, spec
		}
		if r.Status == store.RunTerminating {
			continue
		}
		jobs, err := c.st.ListJobs(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("gateway %s services: %w", name, err)
		}
		for _, j := range latestSubmissions(jobs) {
			gr.jobs = append(gr.jobs, gatewayJob{job: j, spec: spec})
		}
	}
	slices.Sort(order)
	out := make([]gatewayRun, 0, len(order))
	for _, n := range order {
		out = append(out, *byName[n])
	}
	return out, nil
}

// servedBy reports whether a service with gateway ref is served by
// gateway name (isDefault: it is the default gateway).
func servedBy(ref *schema.GatewayRef, name string, isDefault bool) bool {
	switch {
	case ref == nil:
		return isDefault
	case !ref.Enabled:
		return false
	case ref.Ref != nil:
		return ref.Ref.Name == name
	}
	return isDefault
}

// isDefaultGateway reports whether gateway name is the project's default
// (`default: true`).
func (c *Controller) isDefaultGateway(ctx context.Context, name string) (bool, error) {
	gws, err := c.st.ListGateways(ctx, store.InfraFilter{Project: c.cfg.Project})
	if err != nil {
		return false, err
	}
	for _, g := range gws {
		var s schema.Gateway
		if g.Name == name && json.Unmarshal(g.Spec, &s) == nil {
			return s.Default, nil
		}
	}
	return false, nil
}

// serviceGateway returns the running gateway that serves a service run
// with spec, if any.
func (c *Controller) serviceGateway(ctx context.Context, spec runSpec) (store.Gateway, schema.Gateway, bool) {
	if spec.Gateway != nil && !spec.Gateway.Enabled {
		return store.Gateway{}, schema.Gateway{}, false
	}
	gws, err := c.st.ListGateways(ctx, store.InfraFilter{Project: c.cfg.Project})
	if err != nil {
		return store.Gateway{}, schema.Gateway{}, false
	}
	for _, g := range gws {
		var s schema.Gateway
		if json.Unmarshal(g.Spec, &s) != nil {
			continue
		}
		if servedBy(spec.Gateway, g.Name, s.Default) {
			return g, s, true
		}
	}
	return store.Gateway{}, schema.Gateway{}, false
}

// nudgeGateway has the gateway serving a service run with spec look at
// its configuration now rather than at its next periodic pass.
func (c *Controller) nudgeGateway(ctx context.Context, spec runSpec) {
	if g, _, ok := c.serviceGateway(ctx, spec); ok && g.Status == store.GatewayRunning {
		c.gws.Add(g.ID)
	}
}

// gatewayReplica returns how gateway g reaches job j: directly when the
// replica runs on the gateway's own host, over SSH when the replica's
// backend says how to log in to its host (HostAccess). ok is false for a
// replica that is not ready; msg is set for a ready one the gateway
// cannot reach (dstack's GATEWAY_ERROR).
func (c *Controller) gatewayReplica(ctx context.Context, g *store.Gateway, j store.Job, spec runSpec) (api.GatewayReplica, string, bool) {
	if j.Status != store.JobRunning || !c.replicaReady(j.ID, spec.Probes) {
		return api.GatewayReplica{}, "", false
	}
	var rd runtimeData
	if json.Unmarshal(j.RuntimeData, &rd) != nil || rd.ServiceAddr == "" {
		return api.GatewayReplica{}, "", false
	}
	rep := api.GatewayReplica{JobID: j.ID, Addr: rd.ServiceAddr}
	inst, err := c.st.GetInstance(ctx, j.InstanceID)
	if err != nil {
		return api.GatewayReplica{}, "", false
	}
	if c.sameHost(g, inst) {
		return rep, "", true
	}
	ha, ok := c.bes[inst.Backend].(backends.HostAccess)
	if !ok {
		return api.GatewayReplica{}, fmt.Sprintf("gateway %s cannot reach the replica: backend %s gives no login to its hosts", g.Name, inst.Backend), false
	}
	h, err := ha.SSHAccess(ctx, backends.Instance{ID: inst.ID, Backend: inst.Backend, Region: inst.Region,
		Hostname: inst.Hostname, HostKey: inst.HostKey, Tags: inst.OwnershipTags})
	if err != nil {
		c.log.Warn("replica host access failed", "gateway", g.Name, "job", j.JobName, "error", err)
		return api.GatewayReplica{}, "", false
	}
	rep.SSH = gatewaySSH(h)
	return rep, "", true
}

// sameHost reports whether instance inst runs on gateway g's host: both on
// a backend whose instances share this host (local), or at one address.
func (c *Controller) sameHost(g *store.Gateway, inst store.Instance) bool {
	if inst.Backend == g.Backend && c.traitsOf(inst.Backend).SharedHost {
		return true
	}
	return g.Hostname != "" && inst.Hostname == g.Hostname && inst.Backend == g.Backend
}

func gatewaySSH(h backends.SSHHost) *api.GatewaySSH {
	s := &api.GatewaySSH{Hostname: h.Hostname, Port: h.Port, User: h.User, PrivateKey: string(h.PrivateKey), HostKeys: h.HostKeys}
	if h.ProxyJump != nil {
		s.ProxyJump = gatewaySSH(*h.ProxyJump)
	}
	return s
}

// certCovers reports whether the leaf of PEM chain certPEM is valid for
// host (wildcards as RFC 6125 allows them).
func certCovers(certPEM, host string) bool {
	b, _ := pem.Decode([]byte(certPEM))
	if b == nil {
		return false
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	return err == nil && leaf.VerifyHostname(host) == nil
}

// checkGateways reviews, at validation, what a revision's gateways ask of
// this server (their backend must be configured and run gateways) and
// what its services and gateways ask of each other (support.GatewayRefs).
func (c *Controller) checkGateways(d *schema.Desired) schema.Errors {
	var errs schema.Errors
	for i := range d.Resources {
		r := &d.Resources[i]
		g, ok := r.Spec.(*schema.Gateway)
		if !ok {
			continue
		}
		if _, ok := c.bes[g.Backend].(backends.GatewayHost); !ok {
			errs = append(errs, r.FieldError("backend", "backend %q is not configured on this server or cannot run gateways", g.Backend))
		}
	}
	return append(errs, support.GatewayRefs(d)...)
}
