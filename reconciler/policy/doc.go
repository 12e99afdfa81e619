// Package policy decides what the specs of a revision may ask of the hosts
// that run them: which host directories a run may bind-mount through an
// instance volume (`volumes: [{instance_path: ...}]`), whether such a mount
// is writable, and whether a run may be `privileged` or ask for
// `docker: true`.
//
// The policy is the server's, never the spec repository's: a commit is
// input from many people, and a root container that mounts the host's `/`
// owns the host. It comes from the `policy` section of the server config
// (Config) and grants only: nothing is allowed that no entry grants, so the
// zero Config lets no spec mount a host path or run privileged. Entries
// apply to every backend and project, to one backend (Config.Backends),
// one project (Config.Projects) or one backend of one project.
//
// Some paths are never mountable whatever the config says (HardDenied): the
// file system root, /etc, /root, /proc, /sys, /dev, /boot, the Docker
// socket, the server's data directory and the agents' state. A path equal
// to, below or above (containing) one of them is refused, so that
// mounting /var does not expose /var/run/docker.sock.
//
// Paths are canonicalized before every comparison: cleaned, refused when
// relative or holding "..", and, on backends whose hosts are this machine,
// with symbolic links resolved (Env.Resolve).
//
// Policy.Check is a reconciler.Check: it positions every refusal at the
// offending field and names the setting that would allow it. The job
// worker asks Policy.InstanceVolume and Policy.Privileged again for the
// backend a job was actually placed on, and mounts read-only whatever the
// policy does not grant read-write.
//
// cmd/hoist builds the Policy and the reconciler consults it. The package
// imports only hoist/schema and the standard library.
package policy
