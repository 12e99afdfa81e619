// Package schema is hoist's front door for specs: it loads dstack-style
// `*.dstack.yml` files and CUE files from a revision, validates each
// document against an embedded CUE schema (one definition per `type`),
// normalizes it into typed Go values with every dstack default applied, and
// reports every problem at file:line:col.
//
// Who may import it: anyone. It imports nothing of hoist's and does no I/O
// beyond the fs.FS it is given.
//
// API in brief:
//
//   - Load(fsys) (*Desired, error) loads every spec file under fsys; the
//     error is Errors (sorted, every problem at once) when any spec is
//     invalid. LoadFiles does the same for a list of paths.
//   - Desired.Resources is a deterministic list of Resource{Kind, Name,
//     File, Pos, Spec, JSON}; Spec is *Task, *Service, *DevEnvironment,
//     *Fleet, *Volume or *Gateway; JSON is canonical (byte-identical for
//     specs that mean the same).
//   - Kind (KindTask, ...), Kind.IsRun and Kind.Namespace: runs share one
//     name space; fleets, volumes and gateways each have their own.
//   - Error{Pos, Path, Msg} and Errors implement error as "file:line:col: msg".
//   - Grammar helpers shared with the offers catalog and the CLI:
//     ParseGPU, ParseCPU, ParseRange (counts), ParseMemory and
//     ParseMemoryRange (GB), ParseDuration (seconds), ParsePort,
//     ParseMountPoint, ParseEntityRef, ParseFileMapping, ParseRepo,
//     ParseGPUVendor, ParseCPUArch, GPUVendorsByName, SecretRefs, ValidName.
//   - Normalized types: Resources{CPU, Memory, ShmSize, GPU, Disk} built from
//     Range{Min, Max *float64} (memory in GB), Profile (backends, regions,
//     spot_policy, retry, max_duration, ...), RunConfig, and the per-kind
//     structs. Durations are seconds; Off (-1) marks a switched-off limit.
//   - SchemaSource returns the embedded CUE schema (`hoist schema`).
package schema
