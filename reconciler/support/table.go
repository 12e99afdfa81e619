package support

import (
	"fmt"

	shlex "github.com/anmitsu/go-shlex"

	"hoist/schema"
)

// Decision is what hoist's runtime does with a field.
type Decision string

// The four decisions a Row can hold.
const (
	// Honoured: the runtime does what dstack documents (Row.Test proves it).
	Honoured Decision = "honoured"
	// Partial: honoured for some values (Row.Test proves them); the values
	// Row.Note names are refused.
	Partial Decision = "partial"
	// Refused: any use is an error and the revision is rejected.
	Refused Decision = "refused"
	// Advisory: no effect on what hoist runs; a use gives a warning.
	Advisory Decision = "advisory"
)

// Row is hoist's decision for one field of some kinds.
type Row struct {
	// Kinds are the kinds whose field this row decides.
	Kinds []schema.Kind
	// Field is the field path in the schema's form: dotted keys, "[]" for
	// list items, e.g. "volumes[].name". Empty means the whole resource.
	// A row covers its field and every field nested under it that has no
	// row of its own.
	Field string
	// Decision is what the runtime does with the field.
	Decision Decision
	// Test names the test proving an Honoured or Partial field, as
	// "<directory from the module root>.<TestName>".
	Test string
	// Note says what is not supported (Refused, Partial) or what the
	// warning says (Advisory); for Honoured rows, how it is honoured.
	Note string
	// uses returns the field paths (schema.Error.Path form, with indexes)
	// at which r uses what the row refuses or warns about.
	uses func(r *schema.Resource) []string
}

// Kind groups.
var (
	runKinds = []schema.Kind{schema.KindTask, schema.KindService, schema.KindDevEnvironment}
	task     = []schema.Kind{schema.KindTask}
	service  = []schema.Kind{schema.KindService}
	devEnv   = []schema.Kind{schema.KindDevEnvironment}
	taskDev  = []schema.Kind{schema.KindTask, schema.KindDevEnvironment}
	taskSvc  = []schema.Kind{schema.KindTask, schema.KindService}
	fleet    = []schema.Kind{schema.KindFleet}
	volume   = []schema.Kind{schema.KindVolume}
	gateway  = []schema.Kind{schema.KindGateway}
	allKinds = schema.Kinds
	provider = []schema.Kind{schema.KindProvider}
	workflow = []schema.Kind{schema.KindWorkflow}
)

// maxStopGrace is the longest graceful stop the reconciler gives a job
// (reconciler/jobs.go, finishJob).
const maxStopGrace = 10

// Table is hoist's decision for every field of every kind. A field of the
// embedded schema without a row fails the package's tests.
var Table = []Row{
	// Every kind.
	{Kinds: allKinds, Field: "type", Decision: Honoured, Test: "reconciler.TestSync_typeChangeConverges"},
	{Kinds: allKinds, Field: "name", Decision: Honoured, Test: "e2e.TestReconcile_gitOps"},

	// Runs: what runs.
	{Kinds: runKinds, Field: "image", Decision: Honoured, Test: "e2e.TestSkeleton_gitCommitsDriveRuns"},
	{Kinds: taskSvc, Field: "commands", Decision: Honoured, Test: "e2e.TestSkeleton_gitCommitsDriveRuns",
		Note: "without `commands` the image's entrypoint and cmd run, on hosts with hoist's shim; pods of RunPod, Vast.ai and Kubernetes " +
			"start without them, so there such a job ends saying it must set `commands` (reconciler.TestWorkers_podWithoutCommandsEndsSayingWhy)"},
	{Kinds: devEnv, Field: "init", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob",
		Note: "run on start; the container then stays up"},
	{Kinds: taskSvc, Field: "entrypoint", Decision: Partial, Test: "e2e.TestSupport_honouredFieldsReachTheJob",
		Note: "an `entrypoint` that does not split into words (an unclosed quote or a trailing escape)",
		uses: runIf(func(c *schema.RunConfig) bool {
			_, err := shlex.Split(c.Entrypoint, true)
			return err != nil
		}, "entrypoint")},
	{Kinds: devEnv, Field: "entrypoint", Decision: Refused, Note: "`entrypoint` on a dev environment (dstack refuses it too)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Entrypoint != "" }, "entrypoint")},
	{Kinds: runKinds, Field: "setup", Decision: Refused, Note: "`setup` (deprecated by dstack; put the commands in `commands` or `init`)",
		uses: runIf(func(c *schema.RunConfig) bool { return len(c.Setup) > 0 }, "setup")},
	{Kinds: runKinds, Field: "python", Decision: Refused, Note: "`python` (hoist runs the configured default image; name an `image` with the Python you need)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Python != "" }, "python")},
	{Kinds: runKinds, Field: "nvcc", Decision: Refused, Note: "`nvcc` (hoist has no CUDA-devel default image; name an `image`)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.NVCC }, "nvcc")},
	{Kinds: runKinds, Field: "docker", Decision: Refused, Note: "`docker: true` (Docker-in-Docker)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Docker }, "docker")},
	{Kinds: runKinds, Field: "dstack", Decision: Refused, Note: "`dstack: true` (no server socket inside the job)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Dstack }, "dstack")},
	{Kinds: runKinds, Field: "user", Decision: Honoured, Test: "agents/shim.TestShim_containerSettings"},
	{Kinds: runKinds, Field: "privileged", Decision: Honoured, Test: "e2e.TestSupport_privilegedReachesTheContainer"},
	{Kinds: runKinds, Field: "working_dir", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob"},
	{Kinds: runKinds, Field: "shell", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob"},
	{Kinds: runKinds, Field: "home_dir", Decision: Advisory, Note: "`home_dir` has no effect (deprecated by dstack; the image's HOME applies)",
		uses: writtenAt("home_dir")},
	{Kinds: runKinds, Field: "registry_auth", Decision: Honoured, Test: "e2e.TestSecrets_setByCLIReachEnvAndRegistryAuthAndNeverLeak",
		Note: "as written or from `${{ secrets.NAME }}`"},
	{Kinds: runKinds, Field: "env", Decision: Honoured, Test: "e2e.TestSecrets_setByCLIReachEnvAndRegistryAuthAndNeverLeak",
		Note: "`NAME=value`, `${{ secrets.NAME }}` in values, and `env: [NAME]` from the project's secret NAME"},
	{Kinds: runKinds, Field: "single_branch", Decision: Advisory,
		Note: "`single_branch` has no effect: the run receives the files of one commit, fetched by the server, without a `.git` directory",
		uses: writtenAt("single_branch")},
	{Kinds: runKinds, Field: "repos", Decision: Honoured, Test: "e2e.TestSupport_reposURLIsFetchedWithATokenFromAProjectSecret",
		Note: "a local path of the spec repository at the applied commit, or a `url` (+ `branch`, `hash`) that the server fetches " +
			"with the token or SSH key of the project's HOIST_GIT_* secrets; the run receives the files without a `.git` directory"},
	{Kinds: runKinds, Field: "files", Decision: Honoured, Test: "e2e.TestSupport_codeFromTheSpecRepositoryReachesTheRun",
		Note: "files and directories of the spec repository at the applied commit"},

	// Runs: volumes, by form.
	{Kinds: runKinds, Field: "volumes", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob",
		Note: "instance volumes (`instance_path`) and network volumes (`name`)"},
	{Kinds: runKinds, Field: "volumes[].instance_path", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob"},
	{Kinds: runKinds, Field: "volumes[].path", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob"},
	{Kinds: runKinds, Field: "volumes[].name", Decision: Honoured, Test: "reconciler.TestWorkers_volumeAttachedBeforeTheTaskAndDetachedAfter",
		Note: "network volumes (`name:/path` or `{name, path}`): the job runs in the volume's backend and region, waits while another job " +
			"uses it, and has it attached, formatted (ext4, when hoist created it and it is blank) and mounted; a list of names mounts " +
			"the first one in the instance's backend and region; a volume missing or failed fails the job with `volume_error`; " +
			"`${{ dstack.job_num }}` and `${{ dstack.node_rank }}` in a name resolve per job, so that each node of a multi-node task mounts its own " +
			"(reconciler.TestWorkers_perNodeVolumesByNodeRank), and any other `$` in a name is refused"},
	// On a network volume `optional` is honoured (it skips a volume that is
	// missing or not in the instance's backend and region; test
	// reconciler.TestWorkers_volumeRegisteredAndOptional); only its use on
	// an instance path warns.
	{Kinds: runKinds, Field: "volumes[].optional", Decision: Advisory,
		Note: "`optional` has no effect on an instance path: it is always mounted (created when missing)",
		uses: func(r *schema.Resource) []string {
			var out []string
			for i, m := range r.RunConfig().Volumes {
				if m.Optional && m.InstancePath != "" {
					out = append(out, fmt.Sprintf("volumes[%d].optional", i))
				}
			}
			return out
		}},

	// Runs: resources.
	{Kinds: runKinds, Field: "resources", Decision: Honoured, Test: "e2e.TestElasticFleet_offerWithoutCapacityFailsTheJob",
		Note: "instances must fit cpu, memory and gpu"},
	{Kinds: runKinds, Field: "resources.gpu", Decision: Honoured, Test: "agents/shim.TestShim_tasksGetDistinctGPUs",
		Note: "placement by name, memory, compute capability; count.min GPUs (a fleet block's GPUs on part of an instance) are given to the container, " +
			"NVIDIA GPUs that no other task on the host holds"},
	{Kinds: runKinds, Field: "resources.shm_size", Decision: Honoured, Test: "agents/shim.TestShim_containerSettings"},
	{Kinds: runKinds, Field: "resources.disk", Decision: Refused, Note: "`resources.disk` on a run (instances are not matched by disk size)",
		uses: writtenAt("resources.disk")},

	// Runs: profile.
	{Kinds: runKinds, Field: "backends", Decision: Honoured, Test: "reconciler.TestPlaceJob_backendsFilterInstances",
		Note: "jobs are placed on, wait for and grow fleets of the named backends only (`remote`: SSH hosts)"},
	{Kinds: runKinds, Field: "regions", Decision: Honoured, Test: "reconciler.TestWorkers_placementHonoursRegionsInstanceTypesAndMaxPrice",
		Note: "jobs take, and fleets grow, only instances in one of the regions"},
	{Kinds: runKinds, Field: "instance_types", Decision: Honoured, Test: "reconciler.TestWorkers_placementHonoursRegionsInstanceTypesAndMaxPrice",
		Note: "jobs take, and fleets grow, only instances of one of the types"},
	{Kinds: runKinds, Field: "max_price", Decision: Honoured, Test: "reconciler.TestWorkers_placementHonoursRegionsInstanceTypesAndMaxPrice",
		Note: "jobs take, and fleets grow, only instances at most this price per hour; none: no capacity"},
	{Kinds: runKinds, Field: "availability_zones", Decision: Refused, Note: "`availability_zones`",
		uses: runIf(func(c *schema.RunConfig) bool { return len(c.AvailabilityZones) > 0 }, "availability_zones")},
	{Kinds: runKinds, Field: "reservation", Decision: Refused, Note: "`reservation`",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Reservation != "" }, "reservation")},
	{Kinds: runKinds, Field: "spot_policy", Decision: Refused, Note: "`spot_policy: spot` on a run (whether an instance is spot is its fleet's choice)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.SpotPolicy == "spot" }, "spot_policy")},
	{Kinds: runKinds, Field: "creation_policy", Decision: Refused, Note: "`creation_policy: reuse` (a job may get a new instance from an elastic fleet)",
		uses: runIf(func(c *schema.RunConfig) bool { return c.CreationPolicy == "reuse" }, "creation_policy")},
	{Kinds: runKinds, Field: "retry", Decision: Honoured, Test: "reconciler.TestReconcileRun_retryOnError"},
	{Kinds: runKinds, Field: "max_duration", Decision: Honoured, Test: "agents/shim.TestShim_maxDurationIsEnforced"},
	{Kinds: runKinds, Field: "stop_duration", Decision: Partial, Test: "agents/runner.TestRunner_stopLetsChildrenCleanUpWithinGrace",
		Note: fmt.Sprintf("`stop_duration` above %ds or `off` (a job gets at most %ds to stop)", maxStopGrace, maxStopGrace),
		uses: func(r *schema.Resource) []string {
			d := r.RunConfig().StopDuration
			if written(r, "stop_duration") && (d == schema.Off || d > maxStopGrace) {
				return []string{"stop_duration"}
			}
			return nil
		}},
	{Kinds: runKinds, Field: "idle_duration", Decision: Advisory, Note: "`idle_duration` on a run has no effect: runs create no instances of their own; the fleet's `idle_duration` applies",
		uses: writtenAt("idle_duration")},
	{Kinds: runKinds, Field: "utilization_policy", Decision: Honoured, Test: "reconciler.TestWorkers_runningJobMetricsAreCollectedAndAnIdleGPUStopsTheRun",
		Note: "a job whose GPU stayed under `min_gpu_utilization` in every sample of `time_window` (sampled every 10 s) is terminated with `terminated_due_to_utilization_policy`, as dstack does; a job without GPUs is never"},
	{Kinds: runKinds, Field: "startup_order", Decision: Honoured, Test: "reconciler.TestWorkers_clusterStartupOrder",
		Note: "as dstack: every node waits until all nodes of its replica have instances; `master-first` then keeps the workers' containers until the master runs, " +
			"`workers-first` keeps the master's until every worker runs"},
	{Kinds: runKinds, Field: "stop_criteria", Decision: Honoured, Test: "reconciler.TestWorkers_clusterMasterDoneStopsTheWorkers",
		Note: "`master-done`: the run ends `done` (all_jobs_done) once the master (job 0) is done, and the nodes still running are stopped"},
	{Kinds: runKinds, Field: "schedule", Decision: Honoured, Test: "reconciler.TestReconcileRun_schedule"},
	{Kinds: runKinds, Field: "fleets", Decision: Partial, Test: "e2e.TestSSHFleet",
		Note: "fleets of another project (`project/fleet`)",
		uses: func(r *schema.Resource) []string {
			var out []string
			for i, f := range r.RunConfig().Fleets {
				if f.Project != "" {
					out = append(out, fmt.Sprintf("fleets[%d]", i))
				}
			}
			return out
		}},
	{Kinds: runKinds, Field: "instances", Decision: Refused, Note: "`instances` (pinning a run to fleet instances)",
		uses: runIf(func(c *schema.RunConfig) bool { return len(c.Instances) > 0 }, "instances")},
	{Kinds: runKinds, Field: "priority", Decision: Advisory, Note: "`priority` orders only a multi-node run waiting for a cluster fleet's instances ahead of later jobs " +
		"(reconciler.TestWorkers_higherPriorityGangGoesFirst); other jobs are not queued by it yet",
		uses: runIf(func(c *schema.RunConfig) bool { return c.Priority != 0 }, "priority")},
	{Kinds: runKinds, Field: "tags", Decision: Advisory, Note: "`tags` are not propagated to backend resources",
		uses: runIf(func(c *schema.RunConfig) bool { return len(c.Tags) > 0 }, "tags")},
	{Kinds: runKinds, Field: "backend_options", Decision: Refused, Note: "`backend_options`",
		uses: runIf(func(c *schema.RunConfig) bool { return len(c.BackendOptions) > 0 }, "backend_options")},

	// Tasks and dev environments: ports.
	{Kinds: taskDev, Field: "ports", Decision: Honoured, Test: "e2e.TestSupport_honouredFieldsReachTheJob",
		Note: "published on the instance's loopback; `hoist attach` forwards them to the user's localhost (e2e.TestAttach_sshAndPortsReachTheRunningJob)"},

	// Tasks.
	{Kinds: task, Field: "nodes", Decision: Honoured, Test: "e2e.TestMultiNode_twoNodeTaskTalksAcrossNamespaceHosts",
		Note: "one job per node, placed together on one `placement: cluster` fleet or not at all (reconciler.TestWorkers_gangPlacesEveryNodeInOnePass, TestWorkers_gangWaitsAndNeverStartsAPartialCluster), " +
			"with host networking and dstack's cluster environment (reconciler.TestWorkers_clusterNodesStartTogetherWithTheClusterEnvironment), " +
			"and SSH between the nodes for mpirun as dstack's: each runner accepts the submission's key on port 10022 of its node's IP, " +
			"and the job's user has it as `~/.ssh/dstack_job` with `~/.ssh/config` entries for every node (e2e.TestMPISSH_nodesSSHIntoEachOtherWithTheClusterKey); " +
			"a cloud cluster fleet grows by the gang's missing VMs, in its placement group (e2e.TestClouds_multiNode, on the AWS, GCP and Azure simulators); " +
			"a run waiting for the fleet's instances keeps those it needs from jobs submitted after it (by priority, then submission) and is woken when one is ready or free " +
			"(reconciler.TestWorkers_laterJobsLeaveAWaitingGangTheInstancesItNeeds, TestWorkers_gangIsWokenWhenItsFleetsInstanceIsFreeOrReady); " +
			"on Kubernetes each node is a pod reached at its pod IP over the pod network, the nodes waiting for each other's pods before their jobs start " +
			"(e2e.TestKubernetes_multiNodeTaskTalksOverThePodNetwork, reconciler.TestWorkers_clusterOfContainersUsesTheContainersAddresses)"},
	{Kinds: task, Field: "groups", Decision: Honoured, Test: "e2e.TestGroups_eachGroupRunsItsCommandsOnItsOwnHost",
		Note: "one job per node through the groups in order (job 0, the master, is group 0's first node), each running its group's `commands` with its group's `resources` and `ports`, " +
			"placed as for `nodes` on instances that fit each job's group (reconciler.TestWorkers_groupsRunEachGroupsCommandsWithItsResources); " +
			"`${{ groups[i].nodes[j].IP_ADDRESS }}` in a group's commands becomes that node's internal IP when the job starts; " +
			"the plan prices each group's nodes at its resources' price (reconciler/plan.TestCompute_groupsTaskCostSumsEachGroupsNodesTimesItsPrice)"},

	// Dev environments.
	{Kinds: devEnv, Field: "ide", Decision: Honoured, Test: "e2e.TestDevEnvironment_ideLinkAndInactivityStop",
		Note: "the IDE's deep link in dstack's form (`vscode://vscode-remote/ssh-remote+<run>/<working dir>`, `cursor://` and `windsurf://` alike, " +
			"`zed://ssh/<run>/<working dir>`), to the working directory the runner reported, is on the run page and in the API's `ide_url`; " +
			"it opens the host `hoist attach <run>` writes to ~/.ssh/config"},
	{Kinds: devEnv, Field: "version", Decision: Partial, Test: "reconciler.TestWorkers_devEnvironmentGetsItsIDEServerAndStopsWhenNobodyIsAttached",
		Note: "`version` with `ide: zed`, which installs its server on first connect (for vscode, cursor and windsurf the runner installs " +
			"that version's server, from dstack's URLs or the server config's `ide` mirror, where the IDE looks for it, before `init` runs, " +
			"and a failed download fails the job; dstack's Python and Jupyter extensions and ipykernel are not installed)",
		uses: func(r *schema.Resource) []string {
			if e := r.Spec.(*schema.DevEnvironment); e.Version != "" && e.IDE == "zed" {
				return []string{"version"}
			}
			return nil
		}},
	{Kinds: devEnv, Field: "inactivity_duration", Decision: Honoured, Test: "reconciler.TestWorkers_devEnvironmentGetsItsIDEServerAndStopsWhenNobodyIsAttached",
		Note: "a dev environment with no SSH connection to its runner (`hoist attach`, `hoist ssh`, an IDE) for that long is terminated " +
			"with `inactivity_duration_exceeded` and dstack's message, checked every 10 s, and its run ends as dstack's does (job_failed); " +
			"updatable in place"},

	// Services.
	{Kinds: service, Field: "port", Decision: Honoured, Test: "e2e.TestRollingDeployment_waitsForProbes",
		Note: "published on an ephemeral port of the instance's loopback; probes use it"},
	{Kinds: service, Field: "probes", Decision: Honoured, Test: "e2e.TestRollingDeployment_waitsForProbes"},
	{Kinds: service, Field: "probes[].until_ready", Decision: Advisory, Note: "`until_ready` has no effect: probes keep running after the replica is ready",
		uses: func(r *schema.Resource) []string {
			var out []string
			for i, p := range r.Spec.(*schema.Service).Probes {
				if p.UntilReady {
					out = append(out, fmt.Sprintf("probes[%d].until_ready", i))
				}
			}
			return out
		}},
	{Kinds: service, Field: "replicas", Decision: Partial, Test: "reconciler.TestServices_scalesToZeroAndWakesOnARequest",
		Note: "replica groups (a list under `replicas`)",
		uses: func(r *schema.Resource) []string {
			s := r.Spec.(*schema.Service)
			if !written(r, "replicas") {
				return nil
			}
			if len(s.Groups) > 0 {
				return []string{"replicas"}
			}
			return nil
		}},
	{Kinds: service, Field: "groups", Decision: Refused, Note: "replica `groups`",
		uses: writtenAt("groups")},
	{Kinds: service, Field: "scaling", Decision: Honoured, Test: "reconciler.TestDesiredReplicas_followsRPSWithinTheRangeAfterTheDelays",
		Note: "`metric: rps` as measured by the in-server proxy (dstack's RPSAutoscaler); with `min: 0` a request wakes the service"},
	{Kinds: service, Field: "gateway", Decision: Honoured, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "served at `<run>.<domain>` by the named gateway (or the default one when unset or true); a name the revision does not declare, " +
			"a gateway without `domain`, or `true` without a default gateway is refused at validation"},
	{Kinds: service, Field: "model", Decision: Honoured, Test: "web.TestProxy_tgiModelStreamsAChatCompletion",
		Note: "at hoist's model endpoint /proxy/models/main/: `format: openai` forwarded at its `prefix`; `format: tgi` chat completions rendered through " +
			"`chat_template` into TGI's /generate or /generate_stream and answered as OpenAI's, with `chat_template`/`eos_token` " +
			"read from the model's tokenizer_config.json on the Hugging Face Hub (`HF_ENDPOINT`, the run's `HF_TOKEN`) when not given; " +
			"the run fails when the Hub does not give them (reconciler.TestServices_tgiModelTemplateIsFetchedFromTheHub)"},
	{Kinds: service, Field: "rate_limits", Decision: Honoured, Test: "web.TestProxy_rateLimitsPerClientAndLongestPrefix",
		Note: "at hoist's proxy: a token bucket per prefix and client address, or per value of the `key: {type: header}` header " +
			"(requests without it are not limited; web.TestProxy_rateLimitsKeyedByAHeader); 429 beyond it"},
	{Kinds: service, Field: "auth", Decision: Honoured, Test: "e2e.TestServiceProxy_tokenAuthAndProbeRouting",
		Note: "at hoist's proxy (/proxy/services/main/<run>/): a hoist token as `Authorization: Bearer`, never forwarded to the replica"},
	{Kinds: service, Field: "https", Decision: Honoured, Test: "e2e.TestGateway_localServesServicesOverHTTPSWithACME",
		Note: "on a gateway: TLS (HTTP redirects to it) when true, plain HTTP when false, TLS iff the gateway has a certificate when `auto`; " +
			"true on a gateway with `certificate: null` is refused at validation; hoist's own proxy serves over hoist's listener"},
	{Kinds: service, Field: "strip_prefix", Decision: Honoured, Test: "web.TestProxy_stripPrefixAndForwardedHeaders",
		Note: "at hoist's proxy; the stripped prefix goes to the replica as `X-Forwarded-Prefix`"},

	// Fleets.
	{Kinds: fleet, Field: "nodes", Decision: Honoured, Test: "e2e.TestElasticFleet_jobGetsNewInstanceThenIdleOneIsReaped"},
	{Kinds: fleet, Field: "idle_duration", Decision: Honoured, Test: "e2e.TestElasticFleet_jobGetsNewInstanceThenIdleOneIsReaped"},
	{Kinds: fleet, Field: "backends", Decision: Honoured, Test: "e2e.TestElasticFleet_jobGetsNewInstanceThenIdleOneIsReaped"},
	{Kinds: fleet, Field: "resources", Decision: Honoured, Test: "e2e.TestElasticFleet_offerWithoutCapacityFailsTheJob"},
	{Kinds: fleet, Field: "regions", Decision: Honoured, Test: "backends/offers/query.TestFromSpec_addsProfile"},
	{Kinds: fleet, Field: "instance_types", Decision: Honoured, Test: "backends/offers/query.TestFromSpec_addsProfile"},
	{Kinds: fleet, Field: "spot_policy", Decision: Honoured, Test: "reconciler.TestWorkers_spotFleetProvisionsSpotOffers"},
	{Kinds: fleet, Field: "max_price", Decision: Honoured, Test: "backends/offers/query.TestFromSpec_addsProfile"},
	{Kinds: fleet, Field: "placement", Decision: Honoured, Test: "reconciler.TestWorkers_clusterFleetPlacementGroup",
		Note: "`cluster`: a cloud fleet's instances are provisioned in the backend and region of its first one and, on backends with placement groups, " +
			"in one placement group per fleet and region, created before the first instance and deleted after the last; an SSH fleet's hosts are taken as they are"},
	{Kinds: fleet, Field: "blocks", Decision: Honoured, Test: "e2e.TestBlocks_twoJobsShareAnInstanceAndAThirdWaits",
		Note: "each instance is split into `blocks` (or `auto`: as many as its GPUs, or CPUs without GPUs) equal shares of CPUs, memory and GPUs, " +
			"the disk whole; a job takes the fewest blocks whose share fits its resources (a multi-node job all of them), and on part of an instance runs " +
			"on bridge networking confined to its share's CPUs and memory, with NVIDIA GPUs no other job holds (agents/shim.TestShim_tasksGetDistinctGPUs, reconciler.TestWorkers_blocksShareAnInstanceBetweenJobs, " +
			"through the server on an SSH host of simulated GPUs e2e.TestBlocks_gpuJobsShareAnSSHHostEachOnItsOwnGPU); " +
			"a fleet provisions only offers that divide evenly, and an instance that does not (or whose GPUs are not NVIDIA's) takes no jobs"},
	{Kinds: fleet, Field: "reservation", Decision: Refused, Note: "`reservation`",
		uses: fleetIf(func(f *schema.Fleet) bool { return f.Reservation != "" }, "reservation")},
	{Kinds: fleet, Field: "availability_zones", Decision: Refused, Note: "`availability_zones`",
		uses: fleetIf(func(f *schema.Fleet) bool { return len(f.AvailabilityZones) > 0 }, "availability_zones")},
	{Kinds: fleet, Field: "retry", Decision: Refused, Note: "`retry` on a fleet (once every offer failed, a fleet is provisioned again only when its spec changes)",
		uses: fleetIf(func(f *schema.Fleet) bool { return f.Retry != nil }, "retry")},
	{Kinds: fleet, Field: "backend_options", Decision: Refused, Note: "`backend_options`",
		uses: fleetIf(func(f *schema.Fleet) bool { return len(f.BackendOptions) > 0 }, "backend_options")},
	{Kinds: fleet, Field: "env", Decision: Refused, Note: "`env` on a fleet (instances get no environment of their own)",
		uses: fleetIf(func(f *schema.Fleet) bool { return len(f.Env) > 0 }, "env")},
	{Kinds: fleet, Field: "tags", Decision: Advisory, Note: "`tags` are not propagated to backend resources",
		uses: fleetIf(func(f *schema.Fleet) bool { return len(f.Tags) > 0 }, "tags")},
	{Kinds: fleet, Field: "ssh_config", Decision: Honoured, Test: "e2e.TestSSHFleet"},
	{Kinds: fleet, Field: "ssh_config.proxy_jump", Decision: Honoured, Test: "backends/sshfleet.TestFleet_proxyJump"},
	{Kinds: fleet, Field: "ssh_config.hosts[].proxy_jump", Decision: Honoured, Test: "backends/sshfleet.TestFleet_proxyJump"},
	{Kinds: fleet, Field: "ssh_config.ssh_key", Decision: Refused, Note: "`ssh_key` (give the key as `identity_file`)",
		uses: writtenAt("ssh_config.ssh_key")},
	{Kinds: fleet, Field: "ssh_config.proxy_jump.ssh_key", Decision: Refused, Note: "`ssh_key` (give the key as `identity_file`)",
		uses: writtenAt("ssh_config.proxy_jump.ssh_key")},
	{Kinds: fleet, Field: "ssh_config.hosts[].ssh_key", Decision: Refused, Note: "`ssh_key` (give the key as `identity_file`)",
		uses: eachHost("ssh_key")},
	{Kinds: fleet, Field: "ssh_config.hosts[].proxy_jump.ssh_key", Decision: Refused, Note: "`ssh_key` (give the key as `identity_file`)",
		uses: eachHost("proxy_jump.ssh_key")},
	{Kinds: fleet, Field: "ssh_config.hosts[].blocks", Decision: Honoured, Test: "reconciler.TestPlaceJob_sshHostBlocks",
		Note: "the host's own `blocks`, as the fleet's `blocks`; a host whose CPUs or GPUs do not divide into them (or whose GPUs are not NVIDIA's) takes no jobs"},
	{Kinds: fleet, Field: "ssh_config.hosts[].internal_ip", Decision: Honoured, Test: "backends/sshfleet.TestFleet_deploysShimsAndRunsTasksOnTwoHosts",
		Note: "the host's internal IP (else its `hostname`): the address the other nodes of a cluster reach it at, in `DSTACK_NODES_IPS`, `DSTACK_MASTER_NODE_IP` and the MPI hostfile " +
			"(reconciler.TestWorkers_clusterNodesStartTogetherWithTheClusterEnvironment)"},
	{Kinds: fleet, Field: "ssh_config.network", Decision: Advisory, Note: "`network` has no effect: a host's internal IP is its `internal_ip`, else its `hostname`",
		uses: writtenAt("ssh_config.network")},

	// Volumes: network volumes of the backends with volumes.
	{Kinds: volume, Field: "", Decision: Honoured, Test: "reconciler.TestWorkers_volumeAttachedBeforeTheTaskAndDetachedAfter",
		Note: "created (or registered with `volume_id`, or on Kubernetes `claim_name`) at a configured backend that has volumes " +
			"(aws, gcp, azure, verda, kubernetes, runpod), with the spec's `tags` under hoist's ownership tags; one that cannot be shows `failed` " +
			"with the reason, and jobs mounting it fail with `volume_error`"},
	{Kinds: volume, Field: "backend", Decision: Honoured, Test: "backends/runpod.TestBackend_volumeTasks",
		Note: "the backend holding the volume; on `runpod`, a network volume in a secure datacenter (`region`): a job mounting it runs in a pod of that datacenter, " +
			"created with the volume (one network volume per pod)"},
	{Kinds: volume, Field: "availability_zone", Decision: Refused,
		Note: "`availability_zone` (hoist places jobs by the volume's region only, so an instance could land in another zone)",
		uses: writtenAt("availability_zone")},
	{Kinds: volume, Field: "volume_id", Decision: Honoured, Test: "reconciler.TestWorkers_volumeRegisteredAndOptional",
		Note: "registered, never formatted nor deleted at the provider"},
	{Kinds: volume, Field: "auto_cleanup_duration", Decision: Honoured, Test: "reconciler.TestWorkers_volumeAutoCleanup",
		Note: "an owned volume unattached and unused (since its last job, or its creation) that long is deleted"},
	{Kinds: volume, Field: "hoist", Decision: Honoured, Test: "reconciler.TestWorkers_volumeDeleteWaitsForDetach",
		Note: "`prune: true`: the volume is deleted when its spec leaves Git (once no job has it attached)"},
	// Kubernetes volumes (PersistentVolumeClaims). The schema refuses these
	// fields on any other volume backend, at their file:line:col.
	{Kinds: volume, Field: "claim_name", Decision: Honoured, Test: "reconciler.TestWorkers_kubernetesClaimIsRegisteredAndMountedReadOnly",
		Note: "an existing PersistentVolumeClaim is registered (never deleted) and mounted into the job's pod"},
	{Kinds: volume, Field: "storage_class_name", Decision: Honoured, Test: "reconciler.TestWorkers_kubernetesVolumeIsCreatedAsAClaim",
		Note: "the PersistentVolumeClaim hoist creates asks for this storage class (none: the cluster's default)"},
	{Kinds: volume, Field: "access_modes", Decision: Honoured, Test: "reconciler.TestWorkers_kubernetesVolumeIsCreatedAsAClaim",
		Note: "the PersistentVolumeClaim hoist creates asks for these access modes (default `[ReadWriteOnce]`)"},
	{Kinds: volume, Field: "read_only", Decision: Honoured, Test: "reconciler.TestWorkers_kubernetesClaimIsRegisteredAndMountedReadOnly",
		Note: "the claim is mounted read-only into the job's container"},

	// Gateways: hoist's gateway process on an instance of a backend that
	// runs it (backends.GatewayHost); the server refuses a gateway whose
	// backend is not configured or cannot.
	{Kinds: gateway, Field: "", Decision: Honoured, Test: "e2e.TestGateway_localServesServicesOverHTTPSWithACME",
		Note: "an instance of the gateway's backend runs hoist's gateway, configured by the server with the services it serves and their ready replicas"},
	{Kinds: gateway, Field: "backend", Decision: Partial, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "`kubernetes` (hoist's gateway is a process of a host, not a pod)",
		uses: func(r *schema.Resource) []string {
			if r.Spec.(*schema.Gateway).Backend == "kubernetes" {
				return []string{"backend"}
			}
			return nil
		}},
	{Kinds: gateway, Field: "region", Decision: Honoured, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "the gateway's instance is an offer of this region (`local` on the local backend)"},
	{Kinds: gateway, Field: "instance_type", Decision: Honoured, Test: "reconciler.TestGateways_instanceTypeAndTagsReachTheInstance",
		Note: "the offer of this instance type; without it the smallest CPU-only on-demand offer"},
	{Kinds: gateway, Field: "domain", Decision: Honoured, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "`*.` stripped and `${{ run.project_name }}` interpolated; services are served at `<run>.<domain>`"},
	{Kinds: gateway, Field: "default", Decision: Honoured, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "services with `gateway` unset or true are served by it; two default gateways are refused at validation"},
	{Kinds: gateway, Field: "public_ip", Decision: Partial, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "`public_ip: false` (hoist's gateway instances always get their backend's public address)",
		uses: func(r *schema.Resource) []string {
			if !r.Spec.(*schema.Gateway).PublicIP {
				return []string{"public_ip"}
			}
			return nil
		}},
	{Kinds: gateway, Field: "certificate", Decision: Partial, Test: "e2e.TestGateway_localServesServicesOverHTTPSWithACME",
		Note: "`type: acm` (hoist has no load balancer); `lets-encrypt` gets certificates by ACME (the server's `gateways.acme`, or a " +
			"`gateways.certificates` entry covering the domain), `null` serves plain HTTP",
		uses: func(r *schema.Resource) []string {
			if c := r.Spec.(*schema.Gateway).Certificate; c != nil && c.Type == "acm" {
				return []string{"certificate"}
			}
			return nil
		}},
	{Kinds: gateway, Field: "replicas", Decision: Partial, Test: "reconciler.TestGateways_provisionedAndConfiguredWithTheirServices",
		Note: "`replicas` greater than 1 (a gateway runs on one instance)",
		uses: func(r *schema.Resource) []string {
			if r.Spec.(*schema.Gateway).Replicas > 1 {
				return []string{"replicas"}
			}
			return nil
		}},
	{Kinds: gateway, Field: "tags", Decision: Honoured, Test: "reconciler.TestGateways_instanceTypeAndTagsReachTheInstance",
		Note: "put on the gateway's instance under hoist's ownership tags"},
	{Kinds: gateway, Field: "hoist", Decision: Honoured, Test: "reconciler.TestGateways_deleteStopsTheGatewayAndTerminatesItsInstance",
		Note: "`prune: true`: the gateway is deleted when its spec leaves Git"},
	{Kinds: gateway, Field: "router", Decision: Refused, Note: "`router` (hoist's gateway routes to replicas itself; no SGLang router)",
		uses: func(r *schema.Resource) []string {
			if r.Spec.(*schema.Gateway).Router != nil {
				return []string{"router"}
			}
			return nil
		}},

	// dstack's custom providers and workflows (.dstack/providers.yaml,
	// .dstack/workflows.yaml, or a CUE spec's `providers` and `workflows`
	// lists). A workflow is a run of the jobs its provider generates.
	{Kinds: workflow, Field: "", Decision: Honoured, Test: "e2e.TestWorkflows_cueProviderDAGRunsInOrderWithArtifacts",
		Note: "a run of the jobs its provider generates: each starts once its `depends_on` are done, with their `artifacts` " +
			"in its working directory; a failed job fails its dependents; `master` gives a job DSTACK_MASTER_NODE_IP"},
	{Kinds: workflow, Field: "provider", Decision: Honoured, Test: "e2e.TestWorkflows_providerOfAnotherRepositoryOverGitDaemon",
		Note: "a provider of the spec repository, or `{repo, name, ref}` of another one, fetched per commit with the project's Git secrets"},
	{Kinds: workflow, Field: "depends-on", Decision: Refused,
		Note: "ordering workflows after one another (hoist orders the jobs of one workflow: the provider's `depends_on`)",
		uses: func(*schema.Resource) []string { return nil }},
	{Kinds: provider, Field: "", Decision: Honoured, Test: "e2e.TestWorkflows_tinyshakespeareProgramProviderOnAContainerCloud",
		Note: "program providers (`image`, `commands`: the workflow on stdin, jobs on stdout, output kept per input hash) " +
			"and CUE providers (`cue`, evaluated at plan time)"},
}

// runIf reports path when a run's config satisfies use.
func runIf(use func(c *schema.RunConfig) bool, path string) func(r *schema.Resource) []string {
	return func(r *schema.Resource) []string {
		if c := r.RunConfig(); c != nil && use(c) {
			return []string{path}
		}
		return nil
	}
}

// eachRepo reports every repos entry that satisfies use.
func eachRepo(use func(r schema.Repo) bool) func(r *schema.Resource) []string {
	return func(r *schema.Resource) []string {
		c := r.RunConfig()
		if c == nil {
			return nil
		}
		var out []string
		for i, repo := range c.Repos {
			if use(repo) {
				out = append(out, fmt.Sprintf("repos[%d]", i))
			}
		}
		return out
	}
}

// fleetIf reports path when a fleet satisfies use.
func fleetIf(use func(f *schema.Fleet) bool, path string) func(r *schema.Resource) []string {
	return func(r *schema.Resource) []string {
		if f, ok := r.Spec.(*schema.Fleet); ok && use(f) {
			return []string{path}
		}
		return nil
	}
}

// eachHost reports sub (a path under a host) for every SSH host that
// writes it.
func eachHost(sub string) func(r *schema.Resource) []string {
	return func(r *schema.Resource) []string {
		f, ok := r.Spec.(*schema.Fleet)
		if !ok || f.SSHConfig == nil {
			return nil
		}
		var out []string
		for i := range f.SSHConfig.Hosts {
			if p := fmt.Sprintf("ssh_config.hosts[%d].%s", i, sub); written(r, p) {
				out = append(out, p)
			}
		}
		return out
	}
}

// writtenAt reports path when the resource's source writes it.
func writtenAt(path string) func(r *schema.Resource) []string {
	return func(r *schema.Resource) []string {
		if written(r, path) {
			return []string{path}
		}
		return nil
	}
}

// written reports whether the resource's source writes the field at path
// (rather than leaving it to a default): PosOf finds the field itself only
// when it is written, and its nearest written ancestor otherwise.
func written(r *schema.Resource, path string) bool {
	return r.PosOf(path) != r.PosOf(parentPath(path))
}

// parentPath drops the last step of a field path ("a.b[2]" → "a.b",
// "a.b" → "a", "a" → "").
func parentPath(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' || path[i] == '[' {
			return path[:i]
		}
	}
	return ""
}
