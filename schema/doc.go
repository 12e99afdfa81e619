// Package schema is hoist's front door for specs: it loads dstack-style
// `*.dstack.yml` files and CUE files from a revision, validates each
// document against an embedded CUE schema (one definition per `type`,
// chosen before unifying), normalizes it into typed Go values with every
// dstack default applied, and reports every problem at file:line:col.
//
// Who may import it: anyone. It imports nothing of hoist's and does no I/O
// beyond the fs.FS it is given.
//
// # Loading
//
//   - Load(fsys) (*Desired, error) loads every spec file under fsys
//     (IsSpecFile: *.dstack.yml, *.dstack.yaml, .dstack.yml, *.cue). When any
//     spec is invalid the error is Errors — every problem, sorted by file,
//     line, column — and the revision must be rejected whole. LoadFiles does
//     the same for an explicit list of paths (what `hoist validate` uses).
//   - A YAML file holds one resource. CUE files of one directory and package
//     are evaluated together with the schema's definitions in scope (#Task,
//     #Service, #DevEnvironment, #Fleet, #AWSVolume, ..., #Gateway); every
//     struct with a `type` field naming a kind is a resource, and its field
//     label is the name when `name` is missing.
//   - A missing name comes from the file (`train.dstack.yml` → train,
//     `.dstack.yml` → its directory), sanitized to ^[a-z][a-z0-9-]{1,40}$.
//     Runs (task, service, dev-environment) share one name space; fleets,
//     volumes and gateways each have their own; a duplicate identity is an
//     error naming both places.
//   - LoadContext and LoadFilesContext run under a context (the daemon's
//     per-revision deadline, a plan request's client): when it ends the
//     load returns at once with an error naming the deadline. CUE cannot be
//     interrupted, so a running evaluation is abandoned; at most two run at
//     once, and content whose evaluation was abandoned is refused at once
//     the next time.
//   - A YAML file's verdict is kept by path and content, so a revision
//     changing one file re-validates that file only; the cross-file checks
//     (identities, workflows and their providers) always run. A file
//     system that names each file's content without reading it
//     (ContentIDFS: a Git snapshot gives each blob's id) spares reading and
//     hashing the unchanged files too.
//
// # Custom providers and workflows
//
// dstack 0.0.x's custom providers are read in their own formats, unchanged:
// ProvidersFile (`.dstack/providers.yaml`: `providers:`, a list of `name`,
// `image`, `commands`) and WorkflowsFile (`.dstack/workflows.yaml`:
// `workflows:`, a list of `name`, `provider` and the provider's
// parameters, which are the workflow's other fields but dstack's own
// `depends-on`), both at the loaded root only. A CUE spec may define them
// as top-level `providers` and `workflows` lists (#Provider, #Workflow);
// all providers share one name space. Each workflow is a Resource of
// KindWorkflow (a run kind) whose Spec is a *Workflow.
//
//   - A provider's optional `schema` (hoist's addition: dstack's provider
//     program named the file itself) is a JSON Schema, inline or the path
//     of a YAML or JSON file from the root, compiled with CUE's JSON-Schema
//     support; each workflow's parameters are checked against it, every
//     problem at the parameter's file:line:col (missing ones at the
//     workflow).
//   - A program provider (`image`, `commands`, optional `inputs`) gives
//     the workflow its Program and InputHash (the workflow, the provider
//     and the files of its inputs); its jobs come from the program's
//     output (ParseProviderOutput) and are set with WithJobs. A CUE
//     provider (`cue`: `parameters` in, `jobs` out) is evaluated here, and
//     its jobs are the workflow's Jobs. Jobs are validated as tasks
//     (decodeJobs): names unique, `depends_on` and `master` known, no
//     cycle.
//   - `provider` is a local name (an unknown one is an error at it) or
//     `{repo, name, ref?}` of another repository: the workflow loads
//     pending (Resource.NeedsProvider) until ResolveWorkflow reads that
//     repository's providers, which the reconciler fetches.
//   - dstack's workflow-level `depends-on` is refused at its position.

// # Limits
//
// Checked before any CUE evaluation, each error naming the limit and the
// file, line and field: MaxFileBytes (1 MiB per file), MaxRevisionBytes and
// MaxRevisionFiles (per revision), MaxListItems and MaxMapKeys (10,000 per
// list or mapping, written out or built by CUE), MaxDepth, MaxValues (after
// YAML aliases) and MaxResourceBytes (1 MiB of canonical JSON per
// resource, which always fits the runner's job-spec limit). A CUE
// comprehension whose sources visibly hold more values than a list may
// (literal lists and structs, list.Range, list.Repeat, references to them,
// multiplied through nesting) is refused without evaluating it. Lists and
// mappings longer than 64 elements are unified with the schema chunk by
// chunk (CUE's own unification of one list is quadratic in its length), so
// validation time is linear in the size of a spec.
//
// # Results
//
//   - Desired.Resources is sorted by name space and name; each Resource has
//     Kind, Name, File, Pos, Spec (*Task, *Service, *DevEnvironment,
//     *Workflow, *Fleet, *Volume or *Gateway) and JSON, the canonical normalized form: specs
//     that mean the same (shorthand vs object forms, env map vs list,
//     reordered sets, explicit defaults) are byte-identical.
//   - Kind (KindTask, ...), Kind.IsRun and Kind.Namespace.
//   - Error{Pos, Path, Msg} and Errors implement error as
//     "file:line:col: msg"; for a missing required field the position is
//     its parent's.
//
// # Normalized values
//
// Range{Min, Max *float64} (counts, or GB for memory/disk), Resources{CPU,
// Memory, ShmSize, GPU, Disk} with defaults cpu 2.., memory 8GB.., disk
// 100GB.., gpu 0.. (1.. once a gpu is given; vendor inferred like dstack's
// server), Profile (backends, regions, spot_policy on-demand, retry,
// max_duration, stop_duration 300, idle_duration 300 for runs / 3d for
// fleets, ...). Durations are seconds; Off (-1) marks a limit switched off.
// EnvVar keeps `${{ secrets.NAME }}` references (Secrets) and bare names
// (FromLocal).
//
// # Grammar helpers
//
// Shared with the offers catalog and the CLI: ParseGPU, ParseCPU,
// ParseRange (counts), ParseMemory and ParseMemoryRange (GB), ParseDuration
// and FormatDuration (seconds), ParsePort, ParseMountPoint, CleanMountPath,
// ParseEntityRef, ParseFileMapping, ParseRepo, ParseGPUVendor, ParseCPUArch,
// ParseComputeCapability, GPUVendorsByName, SecretRefs, ValidName,
// JobVolumeName (a volume name's `${{ dstack.job_num }}` for one job); Range
// has Exact, Contains, Intersect and String.
//
// SchemaSource returns the embedded CUE schema (`hoist schema`).
//
// # Fidelity to dstack
//
// Besides the parser's rules (closed models, pydantic's lax coercions,
// shorthands, cross-field validators), Load applies the checks dstack makes
// in `dstack apply` and on its server at submit time: resource names, SSH
// vs backend fleet fields, SSH host user/key, gateway backends and
// certificates, volume size or id, the default image vs non-NVIDIA
// accelerators and ARM CPUs, ${{ }} interpolation (in volume names only
// `${{ dstack.job_num }}` and `${{ dstack.node_rank }}`), groups IP references,
// probe and utilization limits. Two documented deviations accept configs
// from dstack's own docs that its parser rejects: `optional` on a network
// volume mount, and the gateway-level `router` block. An opt-in
// differential test (testdata/differential) compares verdicts with dstack's
// parser on mutated specs.
//
// # Performance
//
// Each worker (GOMAXPROCS of them) owns a CUE context with the schema
// compiled once; validators are pooled across loads. Top-level fields are
// unified one by one with their definition and the verdicts memoized by
// value, since the definitions hold no cross-field constraints (those are
// checked in Go, where dstack checks them). The Go decoder takes the fields
// each mapping allows and the values each enum allows from the same
// embedded schema, compiled once more on first use, so the schema is their
// one source of truth.
package schema
