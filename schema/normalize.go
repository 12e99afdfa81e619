package schema

import (
	"regexp"
	"sort"
)

var envStringRE = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(=.*\n?$|\n?$)`)

// Field lists per object, shared by the Go decoder's strict checks.
var (
	profileFields = []string{"backends", "regions", "availability_zones", "instance_types", "reservation",
		"spot_policy", "retry", "max_duration", "stop_duration", "max_price", "creation_policy",
		"idle_duration", "utilization_policy", "startup_order", "stop_criteria", "schedule", "fleets",
		"instances", "tags", "backend_options"}
	baseRunFields = []string{"type", "name", "image", "user", "privileged", "entrypoint", "working_dir",
		"home_dir", "registry_auth", "python", "nvcc", "single_branch", "env", "shell", "resources",
		"priority", "volumes", "docker", "repos", "files", "dstack", "setup"}
	taskFields    = concat(baseRunFields, profileFields, []string{"commands", "ports", "nodes", "groups"})
	devEnvFields  = concat(baseRunFields, profileFields, []string{"ports", "ide", "version", "init", "inactivity_duration"})
	serviceFields = concat(baseRunFields, profileFields, []string{"commands", "port", "gateway", "strip_prefix",
		"model", "https", "auth", "scaling", "rate_limits", "probes", "replicas", "groups"})
	fleetFields = []string{"type", "name", "placement", "blocks", "nodes", "reservation", "resources", "backends",
		"regions", "availability_zones", "instance_types", "spot_policy", "retry", "max_price", "idle_duration",
		"tags", "backend_options", "ssh_config", "env"}
	gatewayFields = []string{"type", "name", "default", "backend", "region", "instance_type", "domain",
		"public_ip", "certificate", "replicas", "tags", "router", "hoist"}
	topFields = map[Kind][]string{KindTask: taskFields, KindService: serviceFields,
		KindDevEnvironment: devEnvFields, KindFleet: fleetFields, KindGateway: gatewayFields}
	resourcesFields = []string{"cpu", "memory", "shm_size", "gpu", "disk"}
	backendTypes    = []string{"amddevcloud", "aws", "azure", "cloudrift", "crusoe", "cudo", "datacrunch",
		"digitalocean", "dstack", "gcp", "hotaisle", "jarvislabs", "kubernetes", "lambda", "remote", "nebius",
		"oci", "runpod", "tensordock", "vastai", "verda", "vultr", "slurm",
		"local"} // "local" is hoist's own: this host through Docker
	retryEvents = []string{"no-capacity", "interruption", "error"}
)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// sortedSet sorts and dedupes a list whose order carries no meaning, so
// reordering it never shows up as a change.
func sortedSet(l []string) []string {
	if l == nil {
		return nil
	}
	out := append([]string{}, l...)
	sort.Strings(out)
	w := 0
	for i, s := range out {
		if i == 0 || s != out[w-1] {
			out[w] = s
			w++
		}
	}
	return out[:w]
}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hoistOptions decodes the `hoist:` block, hoist's own extension to a
// volume or gateway spec (dstack has no such field): `prune: true` lets
// hoist delete the resource when its spec leaves Git, without asking.
func (d *dec) hoistOptions(n *node) *HoistOptions {
	if n.isNull() || !d.object(n, "hoist", "prune") {
		return nil
	}
	o := &HoistOptions{Prune: d.optBool(n.get("prune"), "hoist.prune", false)}
	if !o.Prune {
		return nil
	}
	return o
}
