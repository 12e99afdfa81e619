package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/sshfleet"
)

// Compile-time guards: every backend New returns gives SSH access to its
// VMs and runs gateways on them.
var (
	_ backends.HostAccess  = (*Backend)(nil)
	_ backends.GatewayHost = (*Backend)(nil)
	_ backends.HostAccess  = fullBackend{}
	_ backends.GatewayHost = fullBackend{}
)

// Gateway listener ports on a VM (dstack's gateway serves 80 and 443).
const (
	gatewayHTTPPort  = 80
	gatewayHTTPSPort = 443
)

// gatewayHealthWait bounds how long StartGateway waits for a started
// gateway's health check to answer.
const gatewayHealthWait = 15 * time.Second

// SSHAccess returns the login to the instance's VM: its address, the login
// user, the instance's own private key and the VM's host key as pinned at
// takeover (from the console output, or at first contact).
func (b *Backend) SSHAccess(ctx context.Context, inst backends.Instance) (backends.SSHHost, error) {
	if _, err := b.runningRecord(inst.ID); err != nil {
		return backends.SSHHost{}, err
	}
	return b.hosts.SSHAccess(ctx, inst)
}

// StartGateway runs hoist's gateway on the instance's VM (see
// sshfleet.StartGatewayProcess): Deps.GatewayBinary uploaded next to the
// agents, the token in a file only the login user reads, listeners on the
// VM's own address at ports 80 and 443 (the provider maps the public IP to
// it; the instance was created with InstanceSpec.Gateway, which opens
// them), under a supervisor that outlives the server. A gateway running
// with the same token is left alone. Once started, its health check is
// asked through Connect's HTTP client at the admin socket.
func (b *Backend) StartGateway(ctx context.Context, inst backends.Instance, spec backends.GatewayProcess) (backends.GatewayEndpoint, error) {
	r, err := b.runningRecord(inst.ID)
	if err != nil {
		return backends.GatewayEndpoint{}, err
	}
	proc, err := b.hosts.StartGatewayProcess(ctx, inst.ID, sshfleet.GatewayRun{
		Binary: b.cfg.Deps.GatewayBinary, Token: spec.Token, HTTPPort: gatewayHTTPPort, HTTPSPort: gatewayHTTPSPort,
	})
	if err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("vm: instance %s: %w", inst.ID, err)
	}
	public := r.Address
	if h, _, err := net.SplitHostPort(r.Address); err == nil {
		public = h
	}
	ep := backends.GatewayEndpoint{AdminURL: api.UnixAddr(proc.Socket), PublicAddr: public, HTTPPort: gatewayHTTPPort, HTTPSPort: gatewayHTTPSPort}
	if proc.Started {
		if err := b.gatewayHealthy(ctx, inst, ep, spec.Token); err != nil {
			return ep, backends.Transient(fmt.Errorf("vm: instance %s: gateway started but not answering: %w", inst.ID, err))
		}
		b.log.Info("gateway_ready", "instance", inst.ID, "public_addr", public, "listen_ip", proc.IP)
	}
	return ep, nil
}

// gatewayHealthy waits (bounded) for the gateway's health check to answer
// through the instance's connection.
func (b *Backend) gatewayHealthy(ctx context.Context, inst backends.Instance, ep backends.GatewayEndpoint, token string) error {
	conn, err := b.hosts.Connect(ctx, inst)
	if err != nil {
		return err
	}
	defer conn.Close()
	gc := api.NewGatewayClient(ep.AdminURL, conn.HTTPClient(), token)
	wctx, cancel := context.WithTimeout(ctx, gatewayHealthWait)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		_, err := gc.Health(wctx)
		if err == nil || errors.Is(err, api.ErrIncompatibleAgent) || errors.Is(err, api.ErrUnauthorized) {
			return err
		}
		select {
		case <-wctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// StopGateway stops the gateway on the instance's VM; not running, and an
// instance without a record, is success. Terminating the VM needs no call
// of it.
func (b *Backend) StopGateway(ctx context.Context, inst backends.Instance) error {
	r, ok, err := b.recs.get(inst.ID)
	if err != nil {
		return err
	}
	if !ok || !r.Running || r.Deleting {
		return nil
	}
	if err := b.hosts.StopGatewayProcess(ctx, inst.ID); err != nil {
		return fmt.Errorf("vm: instance %s: %w", inst.ID, err)
	}
	return nil
}

// runningRecord returns the record of an instance whose VM was taken over
// and is not being deleted.
func (b *Backend) runningRecord(id string) (*record, error) {
	r, ok, err := b.recs.get(id)
	if err != nil {
		return nil, err
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("vm: instance %s: %w", id, backends.ErrNotFound)
	case r.Deleting:
		return nil, backends.Stalled(fmt.Errorf("vm: instance %s is being terminated", id))
	case !r.Running:
		return nil, backends.Transient(fmt.Errorf("vm: instance %s: the VM is not running yet", id))
	}
	return r, nil
}
