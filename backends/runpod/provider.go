package runpod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"hoist/backends"
	"hoist/backends/podcloud"
)

var _ podcloud.Provider = (*Provider)(nil)

// EnvTags is the pod environment variable holding the pod's tags as a JSON
// object: RunPod pods have no labels, but their env is read back by the
// API (pod, myself.pods), so ListPods finds hoist's pods by it.
const EnvTags = "HOIST_TAGS"

// Pod statuses and types as RunPod spells them (desiredStatus, podType).
const (
	statusRunning    = "RUNNING"
	statusExited     = "EXITED"
	statusTerminated = "TERMINATED"
	podInterruptable = "INTERRUPTABLE"
)

// defaultDiskGB is the container disk of an offer that says none (dstack's
// default disk size).
const defaultDiskGB = 100

// minCUDAVersion is the oldest CUDA a host may have (gpuhunt's
// RunpodProvider.MIN_CUDA_VERSION, which dstack also deploys with).
const minCUDAVersion = "12.8"

// Provider is RunPod for the container-cloud engine (backends/podcloud):
// GPU pods deployed on demand or as interruptible pods, in the secure cloud
// (datacenters) or, when allowed, the community cloud (countries).
type Provider struct {
	// name is the backend entry's name (set by Factory; empty when the
	// Provider is used on its own): Offers answers nothing to a query
	// naming other backends only.
	name      string
	api       *client
	regions   []string
	community bool
	log       *slog.Logger

	mu    sync.Mutex
	auths map[string]string // registry auth id by pod id, deleted with the pod
}

// NewProvider validates opts and returns the Provider; httpClient nil
// means one with dstack's 120 s timeout.
func NewProvider(opts Options, httpClient *http.Client, log *slog.Logger) (*Provider, error) {
	endpoint, err := opts.check()
	if err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: requestTimeout}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Provider{
		api:       &client{endpoint: endpoint, key: opts.Creds.APIKey, http: httpClient},
		regions:   slices.Clone(opts.Regions),
		community: opts.CommunityCloud,
		log:       log,
		auths:     map[string]string{},
	}, nil
}

// Check makes a cheap call that fails on a bad key (the GPU catalog).
func (p *Provider) Check(ctx context.Context) error {
	var out wireCatalog
	return classify(p.api.do(ctx, "check", queryCatalog, nil, &out))
}

// dockerArgs is dstack's way of replacing the image's entrypoint and
// command: dockerArgs holding the JSON {"cmd": [...], "entrypoint": [...]}
// (compute.py, _get_docker_args). The last element of command is the
// command, the rest the entrypoint: ["/bin/sh", "-c", script] gives
// dstack's exact shape.
func dockerArgs(command []string) (string, error) {
	if len(command) == 0 {
		return "", nil
	}
	v := struct {
		Cmd        []string `json:"cmd"`
		Entrypoint []string `json:"entrypoint"`
	}{Cmd: []string{}, Entrypoint: command}
	if len(command) > 1 {
		v.Entrypoint, v.Cmd = command[:len(command)-1], command[len(command)-1:]
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// CreatePod deploys one pod: podFindAndDeployOnDemand, or
// podRentInterruptable for a spot offer with a bid of the offer's price
// per GPU, with the spec's network volume (networkVolumeId at
// volumeMountPath; one at most, read-write, in a datacenter). The tags go
// in the pod's env (EnvTags). With registry
// credentials, the driver saves a registry auth first and sets it on the
// pod with podEditJob (the deploy inputs have none, as dstack found); the
// auth is deleted when the pod is terminated through this Provider (one
// left by a server that stopped in between stays in the account, as
// dstack's daily cleanup would leave it).
func (p *Provider) CreatePod(ctx context.Context, spec podcloud.PodSpec) (podcloud.Pod, error) {
	o := spec.Offer
	secure := secureRegion(o.Region)
	if !secure && !p.community {
		return podcloud.Pod{}, backends.Stalled(fmt.Errorf("runpod: region %q is in the community cloud, which community_cloud: false forbids", o.Region))
	}
	switch {
	case len(spec.Volumes) > 1:
		return podcloud.Pod{}, backends.Stalled(fmt.Errorf("runpod: %d network volumes: a pod mounts at most one", len(spec.Volumes)))
	case len(spec.Volumes) == 1 && spec.Volumes[0].ReadOnly:
		return podcloud.Pod{}, backends.Stalled(errors.New("runpod: network volumes are mounted read-write only"))
	case len(spec.Volumes) == 1 && !secure:
		return podcloud.Pod{}, backends.Stalled(fmt.Errorf("runpod: region %q is in the community cloud, which has no network volumes", o.Region))
	}
	if o.GPUCount < 1 {
		return podcloud.Pod{}, backends.Stalled(fmt.Errorf("runpod: offer %s has no GPU; the driver deploys GPU pods only", o.Instance))
	}
	args, err := dockerArgs(spec.Command)
	if err != nil {
		return podcloud.Pod{}, err
	}
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	tags, err := json.Marshal(spec.Tags)
	if err != nil {
		return podcloud.Pod{}, err
	}
	env[EnvTags] = string(tags)
	envList := []map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, map[string]string{"key": k, "value": env[k]})
	}
	ports := make([]string, len(spec.Ports))
	for i, port := range spec.Ports {
		ports[i] = strconv.Itoa(port) + "/tcp"
	}
	disk := int(o.DiskGB)
	if disk <= 0 {
		disk = defaultDiskGB
	}
	in := map[string]any{
		"name":              spec.Name,
		"imageName":         spec.Image,
		"gpuTypeId":         o.Instance,
		"gpuCount":          o.GPUCount,
		"containerDiskInGb": disk,
		"volumeInGb":        0,
		"minVcpuCount":      o.CPUs,
		"minMemoryInGb":     int(o.MemoryGB),
		"dockerArgs":        args,
		"ports":             strings.Join(ports, ","),
		"env":               envList,
		"supportPublicIp":   true,
		"startSsh":          false,
		"minCudaVersion":    minCUDAVersion,
	}
	if len(spec.Volumes) == 1 {
		// One network volume, set at deploy (dstack's run_job): the pod
		// lands in the volume's datacenter, which is the offer's.
		in["networkVolumeId"], in["volumeMountPath"] = spec.Volumes[0].ID, spec.Volumes[0].Path
	}
	if secure {
		in["cloudType"], in["dataCenterId"] = "SECURE", o.Region
	} else {
		in["cloudType"], in["countryCode"] = "COMMUNITY", o.Region
	}
	query, field := mutationDeployOnDemand, "podFindAndDeployOnDemand"
	if o.Spot {
		query, field = mutationDeploySpot, "podRentInterruptable"
		in["bidPerGpu"] = o.Price / float64(o.GPUCount)
	}
	var authID string
	if spec.RegistryUsername != "" {
		if authID, err = p.saveRegistryAuth(ctx, spec); err != nil {
			return podcloud.Pod{}, err
		}
	}
	out := map[string]*wirePod{}
	if err := p.api.do(ctx, field, query, map[string]any{"input": in}, &out); err != nil {
		p.deleteRegistryAuth(authID)
		return podcloud.Pod{}, classify(err)
	}
	wp := out[field]
	if wp == nil || wp.ID == "" {
		p.deleteRegistryAuth(authID)
		return podcloud.Pod{}, backends.Transient(fmt.Errorf("runpod: %s returned no pod", field))
	}
	if authID != "" {
		p.mu.Lock()
		p.auths[wp.ID] = authID
		p.mu.Unlock()
		edit := map[string]any{"podId": wp.ID, "imageName": spec.Image, "containerDiskInGb": disk, "containerRegistryAuthId": authID}
		if err := p.api.do(ctx, "podEditJob", mutationEditJob, map[string]any{"input": edit}, nil); err != nil {
			// The pod exists without its registry auth: it cannot pull.
			_ = p.TerminatePod(context.WithoutCancel(ctx), wp.ID)
			return podcloud.Pod{}, classify(err)
		}
	}
	pod := toPod(*wp)
	p.log.Info("pod_created", "pod", pod.ID, "name", spec.Name, "gpu_type", o.Instance, "region", o.Region, "spot", o.Spot)
	return pod, nil
}

// saveRegistryAuth saves the spec's registry credentials under a unique
// name (the pod's name and random hex).
func (p *Provider) saveRegistryAuth(ctx context.Context, spec podcloud.PodSpec) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	in := map[string]any{"name": spec.Name + "-" + hex.EncodeToString(b[:]), "username": spec.RegistryUsername, "password": spec.RegistryPassword}
	var out struct {
		SaveRegistryAuth *struct {
			ID string `json:"id"`
		} `json:"saveRegistryAuth"`
	}
	if err := p.api.do(ctx, "saveRegistryAuth", mutationSaveRegistryAuth, map[string]any{"input": in}, &out); err != nil {
		return "", classify(err)
	}
	if out.SaveRegistryAuth == nil || out.SaveRegistryAuth.ID == "" {
		return "", backends.Transient(errors.New("runpod: saveRegistryAuth returned no id"))
	}
	return out.SaveRegistryAuth.ID, nil
}

// deleteRegistryAuth deletes a registry auth the driver saved ("" is
// none); a failure is logged, never returned.
func (p *Provider) deleteRegistryAuth(id string) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := p.api.do(ctx, "deleteRegistryAuth", mutationDeleteRegistryAuth, map[string]any{"id": id}, nil); err != nil {
		p.log.Warn("registry_auth_not_deleted", "registry_auth", id, "err", err)
	}
}

// GetPod observes a pod; RunPod answers null for a pod it does not know
// (never created, or terminated), which wraps ErrNotFound.
func (p *Provider) GetPod(ctx context.Context, id string) (podcloud.Pod, error) {
	var out struct {
		Pod *wirePod `json:"pod"`
	}
	if err := p.api.do(ctx, "pod", queryPod, map[string]any{"input": map[string]any{"podId": id}}, &out); err != nil {
		return podcloud.Pod{}, classify(err)
	}
	if out.Pod == nil || out.Pod.ID == "" || out.Pod.DesiredStatus == statusTerminated {
		return podcloud.Pod{}, fmt.Errorf("runpod: pod %s: %w", id, backends.ErrNotFound)
	}
	return toPod(*out.Pod), nil
}

// TerminatePod terminates a pod; RunPod's "pod not found to terminate" is
// success. The registry auth the driver saved for it is deleted then.
func (p *Provider) TerminatePod(ctx context.Context, id string) error {
	err := p.api.do(ctx, "podTerminate", mutationTerminate, map[string]any{"input": map[string]any{"podId": id}}, nil)
	if err != nil && !podNotFound(err) {
		return classify(err)
	}
	p.mu.Lock()
	authID := p.auths[id]
	delete(p.auths, id)
	p.mu.Unlock()
	p.deleteRegistryAuth(authID)
	if err == nil {
		p.log.Info("pod_terminated", "pod", id)
	}
	return nil
}

// ListPods returns the account's pods whose EnvTags carry every one of
// tags; pods without EnvTags (not hoist's) are never listed.
func (p *Provider) ListPods(ctx context.Context, tags map[string]string) ([]podcloud.Pod, error) {
	var out struct {
		Myself *struct {
			Pods []wirePod `json:"pods"`
		} `json:"myself"`
	}
	if err := p.api.do(ctx, "myself.pods", queryPods, nil, &out); err != nil {
		return nil, classify(err)
	}
	if out.Myself == nil {
		return nil, backends.Transient(errors.New("runpod: myself is null"))
	}
	var pods []podcloud.Pod
	for _, wp := range out.Myself.Pods {
		pod := toPod(wp)
		if pod.Tags == nil || wp.DesiredStatus == statusTerminated {
			continue
		}
		match := true
		for k, v := range tags {
			match = match && pod.Tags[k] == v
		}
		if match {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// env reads RunPod's env list ("KEY=value" strings).
func env(list []string) map[string]string {
	out := map[string]string{}
	for _, kv := range list {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// toPod maps a RunPod pod: desiredStatus RUNNING with a runtime is
// running, without one starting (pulling, starting, or restarting: as far
// as we know RunPod restarts a pod's container that ends, and the API has
// no exit code, so the end of a job is learnt from its runner, not from the
// pod); EXITED
// and TERMINATED are exited, with lastStatusChange as the message. An
// interruptible pod that exited was reclaimed: RunPod stops interruptible
// pods it takes back (desiredStatus EXITED) and hoist never stops a pod,
// only terminates it (RunPod does not document a reason field; this is
// the one signal the API gives). Ports are runtime.ports' public TCP
// mappings.
func toPod(wp wirePod) podcloud.Pod {
	pod := podcloud.Pod{ID: wp.ID, Name: wp.Name, Message: wp.LastStatusChange, Price: wp.CostPerHr}
	switch wp.DesiredStatus {
	case statusRunning:
		pod.Status = podcloud.PodStarting
		if wp.Runtime != nil {
			pod.Status = podcloud.PodRunning
		}
	case statusExited, statusTerminated:
		pod.Status = podcloud.PodExited
		pod.Interrupted = wp.PodType == podInterruptable && wp.DesiredStatus == statusExited
	default: // CREATED, RESTARTING, ...
		pod.Status = podcloud.PodStarting
	}
	if wp.Runtime != nil {
		for _, port := range wp.Runtime.Ports {
			if port.IsIPPublic && port.Type == "tcp" && port.IP != "" && port.PublicPort > 0 {
				if pod.Ports == nil {
					pod.Ports = map[int]string{}
				}
				pod.Ports[port.PrivatePort] = net.JoinHostPort(port.IP, strconv.Itoa(port.PublicPort))
			}
		}
	}
	if raw, ok := env(wp.Env)[EnvTags]; ok {
		var tags map[string]string
		if json.Unmarshal([]byte(raw), &tags) == nil && tags != nil {
			pod.Tags = tags
		}
	}
	return pod
}
