package runpod

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"hoist/e2e/cloudsim/sim"
)

// RunPod's desired statuses and pod types.
const (
	statusRunning    = "RUNNING"
	statusExited     = "EXITED"
	statusTerminated = "TERMINATED"

	podInterruptable = "INTERRUPTABLE"
	podReserved      = "RESERVED"
)

// stateExited is the simulator's state of a pod RunPod stopped (an
// interrupted spot pod): it still exists, its container does not.
const stateExited = "exited"

// Extra keys of a pod resource.
const (
	extraEnv          = "env" // JSON object
	extraDockerArgs   = "docker_args"
	extraPorts        = "ports"
	extraPodType      = "pod_type"
	extraGPUCount     = "gpu_count"
	extraDiskGB       = "container_disk_gb"
	extraCloudType    = "cloud_type"
	extraDesired      = "desired_status"
	extraStatusChange = "last_status_change"
	extraRegistryAuth = "registry_auth_id"
	extraUsername     = "username"
	extraPassword     = "password"
)

// Messages of RunPod's errors (dstack's runtime notes on
// src/dstack/_internal/core/backends/runpod/api_client.py).
const (
	msgNoInstances = "There are no longer any instances available with the requested specifications. Please refresh and try again."
	msgNotFound    = "pod not found to terminate"
	codeSupply     = "SUPPLY_CONSTRAINT"
)

func (p *Provider) deploy(s *sim.Sim, args map[string]any, spot bool) (any, *gqlerror.Error) {
	in := input(args)
	g := findGPU(str(in, "gpuTypeId"))
	if g == nil {
		return nil, apiError("BAD_USER_INPUT", "Invalid GPU type %q", str(in, "gpuTypeId"))
	}
	if str(in, "imageName") == "" {
		return nil, apiError("BAD_USER_INPUT", "imageName is required")
	}
	count := integer(in, "gpuCount", 1)
	cloud := str(in, "cloudType")
	secure := cloud != "COMMUNITY"
	if cloud == "" || cloud == "ALL" {
		secure = str(in, "countryCode") == ""
	}
	dc, country := str(in, "dataCenterId"), str(in, "countryCode")
	price := g.SecurePrice
	if !secure {
		price = g.CommunityPrice
	}
	podType := podReserved
	if spot {
		bid, _ := num(in, "bidPerGpu")
		min := g.SecureSpot
		if !secure {
			min = g.CommunitySpot
		}
		if min == 0 || bid < min {
			return nil, apiError("BAD_USER_INPUT", "Your bid is too low: the minimum bid is $%.3f/hr per GPU", min)
		}
		price, podType = bid, podInterruptable
	}
	ports, err := parsePorts(str(in, "ports"))
	if err != nil {
		return nil, apiError("BAD_USER_INPUT", "%v", err)
	}
	command, err := dockerCommand(str(in, "dockerArgs"))
	if err != nil {
		return nil, apiError("BAD_USER_INPUT", "dockerArgs: %v", err)
	}
	env := map[string]string{}
	if list, ok := in["env"].([]any); ok {
		for _, e := range list {
			if kv, ok := e.(map[string]any); ok {
				env[str(kv, "key")] = str(kv, "value")
			}
		}
	}
	vol, mountPath := str(in, "networkVolumeId"), str(in, "volumeMountPath")
	if vol != "" {
		if !secure {
			return nil, apiError("BAD_USER_INPUT", "Network volumes are available in the secure cloud only")
		}
		var e *gqlerror.Error
		if dc, e = deployVolume(s, vol, dc); e != nil {
			return nil, e
		}
		if mountPath == "" {
			mountPath = defaultMountPath
		}
	}
	if price == 0 || !g.placed(secure, dc, country, count) || !s.Take(g.ID) {
		return nil, apiError(codeSupply, msgNoInstances)
	}
	region := dc
	if region == "" {
		region = country
	}
	if region == "" && secure {
		region = g.DataCenters[0]
	} else if region == "" {
		region = g.Countries[0]
	}
	envJSON, _ := json.Marshal(env)
	id := p.newID()
	res, err2 := s.Create(sim.Resource{
		Provider: Name, Kind: KindPod, ID: id, Name: str(in, "name"), State: sim.StatePending,
		Region: region, InstanceType: g.ID, Image: str(in, "imageName"), Spot: spot, Price: price * float64(count),
		Extra: map[string]string{
			extraEnv: string(envJSON), extraDockerArgs: str(in, "dockerArgs"), extraPorts: str(in, "ports"),
			extraPodType: podType, extraGPUCount: strconv.Itoa(count), extraDiskGB: strconv.Itoa(integer(in, "containerDiskInGb", 20)),
			extraCloudType: map[bool]string{true: "SECURE", false: "COMMUNITY"}[secure], extraDesired: statusRunning,
			extraStatusChange:  "Rented by User: " + s.Now().UTC().Format(time.RFC1123),
			extraNetworkVolume: vol, extraMountPath: mountPath,
		},
	})
	if err2 != nil {
		return nil, internal(err2)
	}
	// The container starts under the lock, so that a podTerminate of the
	// new pod waits for it and leaves no container behind.
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.start(s, res, command, env, ports, "", ""); e != nil {
		return nil, e
	}
	res, _ = s.Get(Name, id)
	return podJSON(s, res), nil
}

// start runs the pod's container, with RunPod's own variables added to its
// environment (RUNPOD_POD_ID, RUNPOD_GPU_COUNT).
func (p *Provider) start(s *sim.Sim, r sim.Resource, command []string, env map[string]string, ports []int, user, pass string) *gqlerror.Error {
	env = maps.Clone(env)
	env["RUNPOD_POD_ID"] = r.ID
	env["RUNPOD_GPU_COUNT"] = r.Extra[extraGPUCount]
	addr, err := s.StartPod(Name, r.ID, sim.PodSpec{
		Image: r.Image, Command: command, Env: env, Ports: ports, Mounts: podMounts(s, r),
		RegistryUsername: user, RegistryPassword: pass,
	})
	if err != nil {
		_, _ = s.Update(Name, r.ID, func(r *sim.Resource) error {
			r.Message = err.Error()
			return nil
		})
		return nil
	}
	if _, err := s.Update(Name, r.ID, func(r *sim.Resource) error {
		r.Address, r.State, r.Message = addr, sim.StateRunning, ""
		return nil
	}); err != nil {
		return internal(err)
	}
	return nil
}

// parsePorts reads RunPod's ports string ("10022/tcp,8888/http").
func parsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(strings.ReplaceAll(s, " ", ""), ",") {
		if f == "" {
			continue
		}
		num, proto, ok := strings.Cut(f, "/")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 || n > 65535 || (proto != "tcp" && proto != "http") {
			return nil, fmt.Errorf("invalid port %q (want port/tcp or port/http)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// dockerCommand reads dockerArgs: dstack's JSON form
// {"cmd": [...], "entrypoint": [...]} (src/dstack/_internal/core/backends/
// runpod/compute.py, _get_docker_args) replaces the image's entrypoint and
// command; any other text is the command's arguments, split on spaces.
func dockerCommand(args string) ([]string, error) {
	args = strings.TrimSpace(args)
	if args == "" {
		return nil, nil
	}
	if strings.HasPrefix(args, "{") {
		var v struct {
			Cmd        []string `json:"cmd"`
			Entrypoint []string `json:"entrypoint"`
		}
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			return nil, err
		}
		return append(slices.Clone(v.Entrypoint), v.Cmd...), nil
	}
	return strings.Fields(args), nil
}

func podEnv(r sim.Resource) map[string]string {
	env := map[string]string{}
	_ = json.Unmarshal([]byte(r.Extra[extraEnv]), &env)
	return env
}

// podJSON is a Pod object as RunPod shows it. A running container gives
// runtime.ports: every exposed port on the pod's own address, public port
// = private port (the pod shares the simulator's host network). A
// container that ended shows desiredStatus EXITED (RunPod would restart
// it; the simulator does not); one that could not start (the image), or is
// still starting, shows RUNNING without runtime.
func podJSON(s *sim.Sim, r sim.Resource) map[string]any {
	count, _ := strconv.Atoi(r.Extra[extraGPUCount])
	disk, _ := strconv.Atoi(r.Extra[extraDiskGB])
	g := findGPU(r.InstanceType)
	vcpu, mem, display := 0, 0, r.InstanceType
	if g != nil {
		vcpu, mem, display = count*g.VCPUPerGPU, count*g.MemoryPerGPU, g.DisplayName
	}
	envList := []any{}
	env := podEnv(r)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}
	desired, change := r.Extra[extraDesired], r.Extra[extraStatusChange]
	var runtime any
	if r.State == sim.StateTerminated {
		desired = statusTerminated
	} else if desired == statusRunning {
		st, err := s.PodState(Name, r.ID)
		switch {
		case err == nil && st.Running:
			runtime = runtimeJSON(s, r)
		case err == nil && st.ExitCode != nil:
			desired = statusExited
			change = fmt.Sprintf("Exited by Runpod: container exited with code %d", *st.ExitCode)
		case err == nil && st.Message != "":
			change = st.Message
		case r.Message != "":
			change = r.Message
		}
	}
	secure := r.Extra[extraCloudType] == "SECURE"
	m := map[string]any{
		"__typename": "Pod", "id": r.ID, "name": r.Name, "imageName": r.Image,
		"desiredStatus": desired, "lastStatusChange": change, "podType": r.Extra[extraPodType],
		"costPerHr": r.Price, "gpuCount": count, "vcpuCount": float64(vcpu), "memoryInGb": float64(mem),
		"containerDiskInGb": disk, "volumeInGb": 0.0, "dockerArgs": r.Extra[extraDockerArgs],
		"ports": r.Extra[extraPorts], "env": envList, "machineId": "m-" + r.ID,
		"containerRegistryAuthId": nilIfEmpty(r.Extra[extraRegistryAuth]),
		"networkVolumeId":         nilIfEmpty(r.Extra[extraNetworkVolume]), "volumeMountPath": nilIfEmpty(r.Extra[extraMountPath]),
		"uptimeSeconds": 0, "createdAt": r.CreatedAt.UTC().Format(time.RFC3339),
		"machine": map[string]any{
			"podHostId": r.ID + "-" + strconv.Itoa(int(r.CreatedAt.Unix()%100000)), "gpuDisplayName": display,
			"gpuTypeId": r.InstanceType, "secureCloud": secure, "dataCenterId": nilIfEmpty(map[bool]string{true: r.Region}[secure]),
			"location": r.Region,
		},
		"runtime": runtime,
	}
	if runtime != nil {
		m["uptimeSeconds"] = runtime.(map[string]any)["uptimeInSeconds"]
	}
	return m
}

func runtimeJSON(s *sim.Sim, r sim.Resource) map[string]any {
	ports := []map[string]any{}
	for _, f := range strings.Split(r.Extra[extraPorts], ",") {
		num, proto, _ := strings.Cut(strings.TrimSpace(f), "/")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		ports = append(ports, map[string]any{"ip": r.Address, "isIpPublic": proto == "tcp",
			"privatePort": n, "publicPort": n, "type": proto})
	}
	return map[string]any{
		"uptimeInSeconds": int(s.Now().Sub(r.CreatedAt).Seconds()),
		"ports":           ports,
	}
}

// livePod returns a pod that is not terminated.
func livePod(s *sim.Sim, id string) (sim.Resource, bool) {
	r, ok := s.Get(Name, id)
	if !ok || r.Kind != KindPod || r.State == sim.StateTerminated {
		return sim.Resource{}, false
	}
	return r, true
}

// pod answers pod(input: {podId}): null for a pod RunPod does not know
// (never created, or terminated).
func (p *Provider) pod(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	r, ok := livePod(s, str(input(args), "podId"))
	if !ok {
		return nil, nil
	}
	return podJSON(s, r), nil
}

// terminate answers podTerminate: the pod and its container are gone; an
// unknown pod is RunPod's "pod not found to terminate".
func (p *Provider) terminate(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	id := str(input(args), "podId")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := livePod(s, id); !ok {
		return nil, apiError("", msgNotFound)
	}
	if err := s.StopPod(Name, id); err != nil {
		return nil, internal(err)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		now := s.Now().UTC()
		r.State, r.TerminatedAt, r.Address = sim.StateTerminated, &now, ""
		return nil
	}); err != nil {
		return nil, internal(err)
	}
	return nil, nil
}

// editJob answers podEditJob: the pod restarts with the new image and
// registry auth (dstack sets the registry auth this way, since the deploy
// input has none).
func (p *Provider) editJob(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	in := input(args)
	id := str(in, "podId")
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := livePod(s, id)
	if !ok {
		return nil, apiError("", "pod not found")
	}
	var user, pass string
	authID := str(in, "containerRegistryAuthId")
	if authID != "" {
		a, ok := s.Get(Name, authID)
		if !ok || a.Kind != KindRegistryAuth || a.State == sim.StateDeleted {
			return nil, apiError("BAD_USER_INPUT", "container registry auth %s not found", authID)
		}
		user, pass = a.Extra[extraUsername], a.Extra[extraPassword]
	}
	if err := s.StopPod(Name, id); err != nil {
		return nil, internal(err)
	}
	r, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.Image = str(in, "imageName")
		r.Extra[extraDiskGB] = strconv.Itoa(integer(in, "containerDiskInGb", 20))
		r.Extra[extraRegistryAuth] = authID
		r.State = sim.StatePending
		return nil
	})
	if err != nil {
		return nil, internal(err)
	}
	command, _ := dockerCommand(r.Extra[extraDockerArgs])
	ports, _ := parsePorts(r.Extra[extraPorts])
	if e := p.start(s, r, command, podEnv(r), ports, user, pass); e != nil {
		return nil, e
	}
	r, _ = s.Get(Name, id)
	return podJSON(s, r), nil
}

func registryAuths(s *sim.Sim) []sim.Resource {
	var out []sim.Resource
	for _, r := range s.List(Name, KindRegistryAuth) {
		if r.State != sim.StateDeleted {
			out = append(out, r)
		}
	}
	return out
}

func (p *Provider) saveRegistryAuth(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	in := input(args)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range registryAuths(s) {
		if r.Name == str(in, "name") {
			return nil, apiError("BAD_USER_INPUT", "Registry auth with name %q already exists", r.Name)
		}
	}
	r, err := s.Create(sim.Resource{Provider: Name, Kind: KindRegistryAuth, ID: "cra_" + p.newID(), Name: str(in, "name"),
		State: sim.StateAvailable, Extra: map[string]string{extraUsername: str(in, "username"), extraPassword: str(in, "password")}})
	if err != nil {
		return nil, internal(err)
	}
	return map[string]any{"id": r.ID, "name": r.Name}, nil
}

// deleteRegistryAuth refuses an auth a live pod uses (dstack's cleanup
// stops at the first such error).
func (p *Provider) deleteRegistryAuth(s *sim.Sim, args map[string]any) (any, *gqlerror.Error) {
	id := str(args, "registryAuthId")
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := s.Get(Name, id)
	if !ok || r.Kind != KindRegistryAuth || r.State == sim.StateDeleted {
		return nil, apiError("BAD_USER_INPUT", "Registry auth not found")
	}
	for _, pod := range s.List(Name, KindPod) {
		if pod.State != sim.StateTerminated && pod.Extra[extraRegistryAuth] == id {
			return nil, apiError("BAD_USER_INPUT", "Registry auth is in use by pod %s", pod.ID)
		}
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error { r.State = sim.StateDeleted; return nil }); err != nil {
		return nil, internal(err)
	}
	return nil, nil
}

// Interrupt reclaims interruptible pod id as RunPod does: its container
// stops and the pod stays, desiredStatus EXITED, with no runtime. RunPod
// does not document the lastStatusChange text of a reclaimed pod; the
// simulator says "Exited by Runpod: spot pod interrupted".
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := livePod(s, id)
	if !ok {
		return fmt.Errorf("runpod: %w: pod %s", sim.ErrNotFound, id)
	}
	if r.Extra[extraPodType] != podInterruptable {
		return errors.New("runpod: pod " + id + " is not interruptible")
	}
	// The state first: an API call between the two must not see a
	// stopped container of a pod that is not marked interrupted.
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.State, r.Interrupted = stateExited, true
		r.Extra[extraDesired] = statusExited
		r.Extra[extraStatusChange] = "Exited by Runpod: spot pod interrupted"
		return nil
	}); err != nil {
		return err
	}
	return s.StopPod(Name, id)
}
