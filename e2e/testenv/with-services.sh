#!/usr/bin/env bash
# Runs a command with the services the tests use:
#   - a throwaway PostgreSQL cluster on a free loopback port
#     (HOIST_TEST_POSTGRES), stopped afterwards;
#   - a throwaway MinIO, the S3-compatible server of minio.sh, on a free
#     loopback port (HOIST_TEST_S3_ENDPOINT and the rest of HOIST_TEST_S3_*),
#     stopped afterwards (its first build takes minutes, then it is cached);
#   - as root, the real single-node Kubernetes cluster of kubernetes.sh
#     (HOIST_TEST_KUBECONFIG), started in the background so that compiling the
#     tests overlaps its start (cached or a first build), and stopped afterwards
#     when a run of this script started it and no other run still uses it (a
#     cluster started by hand is left alone).
#
# HOIST_TEST_KUBECONFIG names a file that appears once the cluster is up (a
# symbolic link to the kubeconfig `up` prints); until then <it>.log holds the
# start's progress, and <it>.rc its exit status once it ends. testenv.Kubernetes
# waits on them. A HOIST_TEST_KUBECONFIG set by the caller is used as it is;
# HOIST_TEST_KUBERNETES=0 starts no cluster (the Kubernetes tests then skip,
# or fail under CI=true). Likewise a HOIST_TEST_POSTGRES or
# HOIST_TEST_S3_ENDPOINT set by the caller is used as it is, and HOIST_TEST_S3=0
# starts no MinIO.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

k8s_dir="" k8s_pid=""
# Present while the cluster is one a run of this script started.
k8s_ours="${TMPDIR:-/tmp}/hoist-k8s.with-services"

# stop_kubernetes ends what this run started of the cluster, at exit.
stop_kubernetes() {
  [ -n "$k8s_dir" ] || return 0
  # An unfinished start (or build): stop its process group, which exists
  # once setsid has run in the child.
  local i
  for i in $(seq 50); do
    [ ! -e "$HOIST_TEST_KUBECONFIG.rc" ] && kill -0 "$k8s_pid" 2>/dev/null || break
    kill -TERM -- "-$k8s_pid" 2>/dev/null && break
    sleep 0.1
  done
  wait "$k8s_pid" 2>/dev/null || true
  flock -u 7
  if ! flock -xn 7; then
    echo "with-services: another run still uses the Kubernetes cluster; leaving it up for that run" >&2
  elif [ -e "$k8s_ours" ]; then
    bash "$here/kubernetes.sh" down 7>&- || true
    rm -f "$k8s_ours"
  fi
  rm -rf "$k8s_dir"
}
trap stop_kubernetes EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${HOIST_TEST_KUBECONFIG:-}" ] && [ "${HOIST_TEST_KUBERNETES:-1}" != 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "with-services: not root, so no Kubernetes cluster (kubernetes.sh needs root)" >&2
  else
    # Every run holds a shared lock while it runs; the one that ends last
    # (it gets the lock exclusively) stops the cluster, if a run started it.
    exec 7>>"${TMPDIR:-/tmp}/hoist-k8s.users"
    flock -s 7
    bash "$here/kubernetes.sh" status >/dev/null 2>&1 || : >"$k8s_ours"
    k8s_dir=$(mktemp -d "${TMPDIR:-/tmp}/hoist-test-k8s.XXXXXX")
    export HOIST_TEST_KUBECONFIG="$k8s_dir/kubeconfig"
    : >"$HOIST_TEST_KUBECONFIG.log"
    # Its own session (setsid), so that its builds can be stopped as a group;
    # the daemons `up` starts have sessions of their own and outlive it.
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid bash -c '
      rc=0
      out=$(bash "$1/kubernetes.sh" up 2>>"$2.log") || rc=$?
      [ $rc != 0 ] || ln -s "${out##*KUBECONFIG=}" "$2"
      echo $rc >"$2.rc"
    ' with-services "$here" "$HOIST_TEST_KUBECONFIG" </dev/null 7>&- &
    k8s_pid=$!
    echo "with-services: starting Kubernetes in the background (log $HOIST_TEST_KUBECONFIG.log)" >&2
  fi
fi

cmd=("$@")
if [ -z "${HOIST_TEST_S3_ENDPOINT:-}" ] && [ "${HOIST_TEST_S3:-1}" != 0 ]; then
  cmd=(bash "$here/minio.sh" run -- "${cmd[@]}")
fi
if [ -n "${HOIST_TEST_POSTGRES:-}" ]; then
  "${cmd[@]}" 7>&-
else
  bash "$here/postgres.sh" run -- "${cmd[@]}" 7>&-
fi
