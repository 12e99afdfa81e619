package vastai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
)

// Provider is the Vast.ai driver's podcloud.Provider.
type Provider struct {
	backend   string // the backend name, on every offer
	api       *client
	regions   []string
	community bool
	log       *slog.Logger
	cache     *cache.LRUExpireCache // offers by search
}

var (
	_ podcloud.Provider = (*Provider)(nil)
	_ offers.Provider   = (*Provider)(nil)
)

// Name is the backend name the offers belong to (offers.Provider).
func (p *Provider) Name() string { return p.backend }

// defaultDiskGB is the disk of a pod whose offer names none (vast.py's
// create instance default).
const defaultDiskGB = 10

// Destroying a contract that a failed create returned anyway is retried
// on 429 (dstack's compute.py), this many times, this far apart.
const (
	cleanupRetries = 4
	cleanupBackoff = 500 * time.Millisecond
)

// CreatePod rents the ask spec.Offer.Instance (PUT /asks/<id>/, dstack's
// api_client.py create_instance): the job's image with spec.Command as its
// entrypoint and arguments (runtype "args"), spec.Env and spec.Ports
// published on the same host ports ("-p P:P" keys of env, vast.py's
// parse_env), a bid at the offer's price for a spot offer, the name and
// tags in the label. A refused rental (non-2xx, success false) wraps
// backends.ErrNoCapacity, as dstack's NoCapacityError, but for refused
// credentials (stalled) and throttling or server errors (transient); a
// contract created anyway is destroyed.
func (p *Provider) CreatePod(ctx context.Context, spec podcloud.PodSpec) (podcloud.Pod, error) {
	if len(spec.Command) == 0 {
		return podcloud.Pod{}, backends.Stalled(errors.New("vastai: a pod needs a command"))
	}
	env := make(map[string]string, len(spec.Env)+len(spec.Ports))
	for k, v := range spec.Env {
		env[k] = v
	}
	for _, port := range spec.Ports {
		env[fmt.Sprintf("-p %d:%d", port, port)] = "1"
	}
	disk := spec.Offer.DiskGB
	if disk <= 0 {
		disk = defaultDiskGB
	}
	req := createRequest{
		ClientID: "me",
		Image:    spec.Image,
		Disk:     disk,
		Label:    encodeLabel(spec.Name, spec.Tags),
		Env:      env,
		User:     "root",
		Onstart:  spec.Command[0],
		Args:     spec.Command[1:],
		Runtype:  "args",
	}
	if spec.Offer.Spot {
		bid := spec.Offer.Price
		req.Price = &bid
	}
	if spec.RegistryUsername != "" {
		login := fmt.Sprintf("-u %s -p %s %s", spec.RegistryUsername, spec.RegistryPassword, imageRegistry(spec.Image))
		req.ImageLogin = &login
	}
	ans, err := p.api.create(ctx, spec.Offer.Instance, req)
	if err != nil || !ans.Success || ans.NewContract == nil {
		if ans.NewContract != nil {
			p.destroyLeftover(ctx, strconv.FormatInt(*ans.NewContract, 10))
		}
		var ae *APIError
		switch {
		case err == nil:
			return podcloud.Pod{}, fmt.Errorf("%w: vastai: ask %s: %s %s", backends.ErrNoCapacity, spec.Offer.Instance, ans.Error, ans.Msg)
		case !errors.As(err, &ae):
			return podcloud.Pod{}, backends.Transient(err)
		case ae.Status == 401 || ae.Status == 403:
			return podcloud.Pod{}, backends.Stalled(err)
		case ae.Status == 429 || ae.Status >= 500:
			return podcloud.Pod{}, backends.Transient(err)
		}
		return podcloud.Pod{}, fmt.Errorf("%w: ask %s: %w", backends.ErrNoCapacity, spec.Offer.Instance, err)
	}
	id := strconv.FormatInt(*ans.NewContract, 10)
	p.log.Info("instance_created", "instance_id", id, "ask", spec.Offer.Instance, "name", spec.Name, "spot", spec.Offer.Spot)
	return podcloud.Pod{
		ID: id, Name: spec.Name, Status: podcloud.PodStarting, Tags: backends.CopyTags(spec.Tags),
		Price: spec.Offer.Price, Region: spec.Offer.Region, CreatedAt: time.Now(),
	}, nil
}

// destroyLeftover destroys contract id that a refused rental returned,
// retrying on 429.
func (p *Provider) destroyLeftover(ctx context.Context, id string) {
	for i := 0; ; i++ {
		err := p.api.destroy(ctx, id)
		if err == nil || notFound(err) {
			p.log.Info("leftover_contract_destroyed", "instance_id", id)
			return
		}
		if !throttled(err) || i == cleanupRetries {
			p.log.Warn("leftover_contract_not_destroyed", "instance_id", id, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			p.log.Warn("leftover_contract_not_destroyed", "instance_id", id, "err", ctx.Err())
			return
		case <-time.After(cleanupBackoff << i):
		}
	}
}

// GetPod observes instance id (GET /instances/<id>/).
func (p *Provider) GetPod(ctx context.Context, id string) (podcloud.Pod, error) {
	inst, err := p.api.instance(ctx, id)
	if err != nil {
		return podcloud.Pod{}, classify(err)
	}
	if inst == nil || inst.ID == 0 {
		return podcloud.Pod{}, fmt.Errorf("%w: vastai instance %s", backends.ErrNotFound, id)
	}
	return podOf(*inst), nil
}

// TerminatePod destroys instance id (DELETE /instances/<id>/); one Vast.ai
// does not know (no_such_instance) is already gone.
func (p *Provider) TerminatePod(ctx context.Context, id string) error {
	err := p.api.destroy(ctx, id)
	if err == nil || notFound(err) {
		return nil
	}
	return classify(err)
}

// ListPods returns the account's instances (GET /instances/) whose label
// carries all of tags (every one with an installation tag for none).
func (p *Provider) ListPods(ctx context.Context, tags map[string]string) ([]podcloud.Pod, error) {
	insts, err := p.api.instances(ctx)
	if err != nil {
		return nil, classify(err)
	}
	var out []podcloud.Pod
	for _, inst := range insts {
		pod := podOf(inst)
		if _, owned := pod.Tags[backends.TagInstallation]; !owned || !backends.MatchTags(pod.Tags, tags) {
			continue
		}
		out = append(out, pod)
	}
	return out, nil
}

// ociFailure is the status message of a container Docker could not
// create (dstack's compute.py update_provisioning_data).
const ociFailure = "OCI runtime create failed"

// podOf is the engine's view of a Vast.ai instance: running with its
// ports once actual_status is running; exited when Docker could not
// create the container, when the container exited, or when the market
// stopped the instance (cur_state, intended_status and next_state all
// "stopped": an outbid bid, Interrupted); starting otherwise.
func podOf(inst instance) podcloud.Pod {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return strings.TrimSpace(*s)
	}
	pod := podcloud.Pod{
		ID:     strconv.FormatInt(inst.ID, 10),
		Status: podcloud.PodStarting,
		Price:  inst.DPHTotal,
		Region: str(inst.Geolocation),
	}
	pod.Name, pod.Tags = decodeLabel(str(inst.Label))
	if inst.StartDate != nil && *inst.StartDate > 0 {
		sec, frac := math.Modf(*inst.StartDate)
		pod.CreatedAt = time.Unix(int64(sec), int64(frac*1e9))
	}
	actual, msg := str(inst.ActualStatus), str(inst.StatusMsg)
	switch {
	case strings.Contains(msg, ociFailure):
		pod.Status, pod.Message = podcloud.PodExited, msg
	case str(inst.CurState) == "stopped" && str(inst.IntendedStatus) == "stopped" && str(inst.NextState) == "stopped":
		pod.Status, pod.Interrupted = podcloud.PodExited, inst.IsBid
		pod.Message = "stopped by Vast.ai"
		if inst.IsBid {
			pod.Message = "outbid: stopped by Vast.ai"
		}
		if msg != "" {
			pod.Message += ": " + msg
		}
	case actual == "exited":
		pod.Status, pod.Message = podcloud.PodExited, msg
	case actual == "running":
		pod.Status, pod.Message = podcloud.PodRunning, msg
		ip := str(inst.PublicIPAddr)
		for key, bindings := range inst.Ports {
			cport, proto, _ := strings.Cut(key, "/")
			port, err := strconv.Atoi(cport)
			if err != nil || proto != "tcp" || len(bindings) == 0 || ip == "" {
				continue
			}
			if pod.Ports == nil {
				pod.Ports = map[int]string{}
			}
			pod.Ports[port] = net.JoinHostPort(ip, bindings[0].HostPort)
		}
	default:
		pod.Message = msg
	}
	return pod
}

// imageRegistry returns the registry host of an image reference,
// docker.io when it names none (dstack's api_client.py image_login): the
// first path component is a registry when it has a dot or a port, or is
// localhost.
func imageRegistry(image string) string {
	first, _, ok := strings.Cut(image, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}
