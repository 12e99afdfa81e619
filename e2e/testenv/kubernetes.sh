#!/usr/bin/env bash
# Starts and stops a real single-node Kubernetes cluster on this machine,
# without internet and on loopback only, for the tests that need one.
#
#   bash e2e/testenv/kubernetes.sh up             # builds (cached), starts; last line: KUBECONFIG=<path>
#   bash e2e/testenv/kubernetes.sh kubectl ARGS…  # the matching kubectl against the cluster
#   bash e2e/testenv/kubernetes.sh down           # stops what `up` started (by PID files), removes the state
#   bash e2e/testenv/kubernetes.sh status         # exit 0 when the cluster answers (prints its kubeconfig)
#   bash e2e/testenv/kubernetes.sh import IMAGE…  # copies Docker images into the running cluster
#   bash e2e/testenv/kubernetes.sh build          # only builds the binaries into the cache
#   bash e2e/testenv/kubernetes.sh packages       # prints the missing Debian packages (for .ci/run)
#   bash e2e/testenv/kubernetes.sh measure        # times a start (cached; cold with HOIST_MEASURE_COLD=1)
#                                                 # and `kubectl run --rm` of the busybox image
#
# Components: etcd (Debian `etcd-server`); kube-apiserver, kube-scheduler,
# kube-controller-manager, kubelet and kubectl built with `go build` from
# k8s.io/kubernetes through the Go module proxy; a containerd of its own
# (Debian `containerd`, own root/state/socket, CRI plugin) with runc and
# Debian's `containernetworking-plugins`; pods reach each other at their IPs
# over the CNI bridge (an iptables FORWARD rule for that bridge, see
# bridge_forward). Docker's daemon and its containerd
# are only read (`docker save` of $HOIST_K8S_IMAGES, default the busybox test
# image, which `up` builds with busybox-image.sh when Docker lacks it).
#
# Binaries are cached in $HOIST_K8S_CACHE (default ~/.cache/hoist/k8s); the
# cluster's state (certs, etcd data, logs, PID files) lives in
# $HOIST_K8S_STATE (default ${TMPDIR:-/tmp}/hoist-k8s). Pods must use
# `imagePullPolicy: IfNotPresent` (or Never): there is no registry, images are
# imported (at `up`, or with `import`).
#
# Every command may run while another runs: `up`, `down` and `import` take
# an exclusive lock on $HOIST_K8S_STATE.lock, a build one on the cache's
# v<version>.lock, so two callers of `up` both get the one cluster and `down`
# waits for an `up` under way. Only one cluster can run on a machine (fixed
# ports, the kubelet's host paths). Progress goes to stderr; stdout carries
# only what a command prints for its caller. Needs root (kubelet, containerd,
# CNI).
set -euo pipefail

K8S_VERSION="${HOIST_K8S_VERSION:-1.37.2}"
CACHE="${HOIST_K8S_CACHE:-$HOME/.cache/hoist/k8s}"
STATE="${HOIST_K8S_STATE:-${TMPDIR:-/tmp}/hoist-k8s}"
TEST_IMAGE=hoist-e2e/busybox:latest
IMAGES="${HOIST_K8S_IMAGES-$TEST_IMAGE}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN="$CACHE/v$K8S_VERSION/bin"
SRC="$CACHE/v$K8S_VERSION/src"

log() { echo "k8s: $*" >&2; }
die() { echo "k8s: $*" >&2; exit 1; }

# lock_state and lock_build take the script's locks (fds 9 and 8; processes
# the script starts get neither, see start).
lock_state() {
  mkdir -p "$(dirname "$STATE")"
  exec 9>>"$STATE.lock"
  flock 9
}
lock_build() {
  mkdir -p "$CACHE"
  exec 8>>"$CACHE/v$K8S_VERSION.lock"
  flock 8
}

# ---------------------------------------------------------------- build
BINARIES=(kube-apiserver kubelet kubectl kube-scheduler kube-controller-manager)
# k8s.io/kubernetes's own go.mod replaces these with ./staging/src/k8s.io/…,
# which a consumer cannot use; each is published as k8s.io/<name> v0.<minor>.<patch>
# (https://github.com/kubernetes/kubernetes/tree/master/staging#readme).
STAGING=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
  cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
  kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission streaming)

build() {
  local b missing=0
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || missing=1; done
  [ "$missing" = 0 ] && return 0
  lock_build # another caller may be building them: wait, then build only what is still missing
  mkdir -p "$BIN" "$SRC"
  local m minor="${K8S_VERSION#1.}"
  minor="${minor%%.*}"
  [ -s "$SRC/go.mod" ] || {
    printf 'module hoistk8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    for m in "${STAGING[@]}"; do printf '\tk8s.io/%s => k8s.io/%s v0.%s\n' "$m" "$m" "${K8S_VERSION#1.}"; done
    printf ')\n'
  } >"$SRC/go.mod"
  # Without these the binaries report v0.0.0-master (the variables are the ones
  # hack/lib/version.sh sets in the upstream build).
  local ld="-s -w"
  for m in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $m.gitVersion=v$K8S_VERSION -X $m.gitMajor=1 -X $m.gitMinor=$minor -X $m.gitTreeState=clean"
  done
  for b in "${BINARIES[@]}"; do
    [ -x "$BIN/$b" ] && continue
    local t0=$SECONDS
    log "go build k8s.io/kubernetes/cmd/$b@v$K8S_VERSION (the first build takes minutes)"
    (cd "$SRC" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -ldflags "$ld" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b") 8>&- 9>&-
    mv "$BIN/$b.tmp" "$BIN/$b"
    log "built $b in $((SECONDS - t0))s"
  done
}

# ---------------------------------------------------------------- packages and images
# missing_packages prints the Debian packages the cluster needs that are not
# installed, one per line (.ci/run installs them with the rest of the suite's).
missing_packages() {
  command -v etcd >/dev/null 2>&1 || echo etcd-server
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || echo containernetworking-plugins
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || echo containerd
  command -v runc >/dev/null 2>&1 || echo runc
  command -v openssl >/dev/null 2>&1 || echo openssl
  command -v curl >/dev/null 2>&1 || echo curl
  command -v ip >/dev/null 2>&1 || echo iproute2
  command -v flock >/dev/null 2>&1 || echo util-linux
}

# ensure_packages installs the Debian packages that are missing, and only those.
ensure_packages() {
  local need
  need=$(missing_packages)
  if [ -n "$need" ]; then
    log "installing" $need
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # etcd-server's postinst cannot start its service without systemd: harmless.
    # shellcheck disable=SC2086 # one word per package
    apt-get install -y -qq --no-install-recommends $need >/dev/null
  fi
}

# The pod sandbox ("pause") image must be local: no registry is reachable. It is
# a static Go program that reaps children and exits on SIGTERM (what
# https://github.com/kubernetes/kubernetes/blob/master/build/pause/linux/pause.c
# does), put into Docker with `docker import` like the busybox test image.
PAUSE_IMAGE=hoist-e2e/k8s-pause:1
build_pause() {
  docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1 && return 0
  local d
  d=$(mktemp -d)
  mkdir -p "$d/src" "$d/root"
  cat >"$d/src/main.go" <<'EOF'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			if pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  printf 'module pause\n\ngo 1.21\n' >"$d/src/go.mod"
  (cd "$d/src" && CGO_ENABLED=0 GOFLAGS= go build -ldflags "-s -w" -o "$d/root/pause" .)
  tar -C "$d/root" -c pause | docker import --change 'ENTRYPOINT ["/pause"]' - "$PAUSE_IMAGE" >/dev/null
  rm -rf "$d"
}

# ---------------------------------------------------------------- state layout
# Ports, all on 127.0.0.1.
ETCD_PORT=12479 ETCD_PEER_PORT=12480 API_PORT=16543
KUBELET_PORT=20350 KUBELET_HEALTHZ_PORT=20348 SCHEDULER_PORT=20359 CM_PORT=20357
# The kubelet refuses a loopback --node-ip, so the node is named `localhost` and
# the apiserver dials it by that name (--kubelet-preferred-address-types Hostname).
NODE=localhost
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
BRIDGE=hoistk8s0
PKI="$STATE/pki"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
CTRD="$STATE/containerd"
CTRD_SOCK="$CTRD/containerd.sock"
KUBECONFIG_ADMIN="$STATE/admin.kubeconfig"
ctr_() { ctr --address "$CTRD_SOCK" --namespace k8s.io "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" --cache-dir "$STATE/kubectl-cache" "$@"; }

# ---------------------------------------------------------------- processes
# pid_of prints the PID recorded for $1 when that process still runs the
# recorded binary (a reused PID is not ours).
pid_of() {
  local p
  p=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(cat "$PIDS/$1.exe" 2>/dev/null)" ] || return 1
  echo "$p"
}

start() { # name binary args…
  local name=$1
  shift
  pid_of "$name" >/dev/null && return 0
  mkdir -p "$LOGS" "$PIDS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$PIDS/$name.pid"
  readlink -f "$1" >"$PIDS/$name.exe"
  log "started $name (pid $!, log $LOGS/$name.log)"
}

stop() { # name
  local p i
  if p=$(pid_of "$1"); then
    kill -TERM "$p" 2>/dev/null || true
    for i in $(seq 100); do [ -d "/proc/$p" ] || break; sleep 0.1; done
    [ ! -d "/proc/$p" ] || kill -KILL "$p" 2>/dev/null || true
    log "stopped $1 (pid $p)"
  fi
  rm -f "$PIDS/$1.pid"
}

wait_for() { # what timeout_s command…
  local what=$1 end=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "timed out waiting for $what (logs in $LOGS)"
    sleep 0.2
  done
}

# ---------------------------------------------------------------- certificates
# The certificates and kubeconfigs a cluster needs, as described in
# https://kubernetes.io/docs/setup/best-practices/certificates/ (ECDSA, one CA).
cert() { # name CN O SAN usage
  [ -s "$PKI/$1.crt" ] && return 0
  local subj="/CN=$2"
  [ -n "$3" ] && subj="/O=$3$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$1.key" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$5"
    [ -z "$4" ] || echo "subjectAltName=$4"
  } >"$PKI/$1.ext"
  openssl req -new -key "$PKI/$1.key" -subj "$subj" 2>/dev/null |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 -sha256 \
      -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
  rm -f "$PKI/$1.ext"
}

kubeconfig() { # file user cert
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hoist
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: "$2"
  user: {client-certificate: "$PKI/$3.crt", client-key: "$PKI/$3.key"}
contexts:
- name: hoist
  context: {cluster: hoist, user: "$2", namespace: default}
current-context: hoist
EOF
}

pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  [ -s "$PKI/ca.crt" ] || {
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=hoist-k8s-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/ca.crt" 2>/dev/null
  }
  cert apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1" serverAuth
  cert admin hoist-admin system:masters "" clientAuth
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
  cert kubelet "system:node:$NODE" system:nodes "DNS:$NODE,IP:127.0.0.1" serverAuth,clientAuth
  cert scheduler system:kube-scheduler "" "" clientAuth
  cert controller-manager system:kube-controller-manager "" "" clientAuth
  [ -s "$PKI/sa.key" ] || {
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  }
  kubeconfig "$KUBECONFIG_ADMIN" admin admin
  kubeconfig "$STATE/kubelet.kubeconfig" "system:node:$NODE" kubelet
  kubeconfig "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
  kubeconfig "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
}

# ---------------------------------------------------------------- components
start_etcd() {
  mkdir -p "$STATE/etcd"
  chmod 700 "$STATE/etcd"
  start etcd "$(command -v etcd)" --name hoist --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "hoist=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
  # --endpoint-reconciler-type none: the `kubernetes` Service would otherwise
  # advertise 127.0.0.1, which the apiserver rejects as an endpoint.
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types Hostname --profiling=false
  wait_for kube-apiserver 180 curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT/readyz"
}

start_containerd() {
  mkdir -p "$CTRD" "$STATE/cni/net.d" "$STATE/cni/ipam"
  # Our own containerd (https://github.com/containerd/containerd/blob/release/1.6/docs/cri/config.md):
  # own root, state, sockets, runc root and CNI config; Docker's is not used.
  # restrict_oom_score_adj: this machine's root lacks CAP_SYS_RESOURCE, and the
  # pause container's oom_score_adj of -998 then fails runc with "can't get
  # final child's PID from pipe: EOF".
  cat >"$CTRD/config.toml" <<EOF
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$CTRD/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"
EOF
  # Pods get addresses inside their own network namespaces only: the bridge has
  # no address on the host side (isGateway false, no masquerading, no routes).
  cat >"$STATE/cni/net.d/10-hoist.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "hoist", "plugins": [{"type": "bridge", "bridge": "$BRIDGE",
  "isGateway": false, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]]}}]}
EOF
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" addrgenmode none # not even an IPv6 link-local address
    ip link set "$BRIDGE" up
  fi
  bridge_forward -I
  start containerd "$(command -v containerd)" --config "$CTRD/config.toml" --log-level warn
  wait_for containerd 60 ctr_ version
  local img
  for img in "$PAUSE_IMAGE" $IMAGES; do
    if [ "$img" = "$TEST_IMAGE" ] && ! docker image inspect "$img" >/dev/null 2>&1; then
      bash "$HERE/busybox-image.sh" "$img" >&2 || log "could not build $img"
    fi
    if docker image inspect "$img" >/dev/null 2>&1; then
      import_image "$img"
    else
      log "image $img is not in Docker; skipped"
    fi
  done
}

# bridge_forward -I lets pods reach each other across the bridge (the nodes of
# a multi-node job talk at their pod IPs); bridge_forward -D takes that back.
# With br_netfilter loaded, frames crossing a bridge go through iptables'
# FORWARD chain, whose policy Docker sets to DROP
# (https://docs.docker.com/engine/network/packet-filtering-firewalls/); the
# rule accepts what enters and leaves our bridge, as Docker's does for docker0.
bridge_forward() {
  command -v iptables >/dev/null 2>&1 || return 0
  local rule=(FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT)
  if [ "$1" = -I ]; then
    iptables -w -C "${rule[@]}" 2>/dev/null || iptables -w -I "${rule[@]}"
  else
    while iptables -w -D "${rule[@]}" 2>/dev/null; do :; done
  fi
}

# import_image copies Docker's image $1 into our containerd, unless the same
# image (by Docker's image ID, recorded in $STATE/images) is already there.
import_image() {
  local id rec
  id=$(docker image inspect --format '{{.Id}}' "$1" 2>/dev/null) || die "image $1 is not in Docker"
  rec="$STATE/images/$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"
  [ "$(cat "$rec" 2>/dev/null)" = "$id" ] && return 0
  docker save "$1" | ctr_ images import - >/dev/null
  mkdir -p "$STATE/images"
  echo "$id" >"$rec"
  log "imported $1"
}

# The kubelet writes to hard-coded host paths whatever its flags; `up` notes
# which of them existed so that `down` removes only the ones it created.
HOST_PATHS=(/var/log/containers /var/log/pods /var/lib/kubelet/device-plugins /var/lib/kubelet
  /var/lib/cni/results /var/lib/cni /run/netns /run/containerd/s /run/containerd)
# The kubelet sets these sysctls (protectKernelDefaults false); `down` restores them.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

start_kubelet() {
  local p k
  if [ ! -e "$STATE/host.saved" ]; then
    for p in "${HOST_PATHS[@]}"; do [ -e "$p" ] && echo "path $p"; done >"$STATE/host.saved.tmp"
    for k in "${SYSCTLS[@]}"; do echo "sysctl $k=$(sysctl -n "$k")"; done >>"$STATE/host.saved.tmp"
    mv "$STATE/host.saved.tmp" "$STATE/host.saved"
  fi
  mkdir -p "$STATE/kubelet" "$STATE/pod-logs" "$STATE/volume-plugins"
  # failCgroupV1 false: this machine has cgroup v1, which kubelet 1.35+ refuses
  # by default (https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/).
  cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $PKI/ca.crt}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$CTRD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
volumePluginDir: $STATE/volume-plugins
podLogsDir: $STATE/pod-logs
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
shutdownGracePeriod: 0s
EOF
  start kubelet "$BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --hostname-override "$NODE" --root-dir "$STATE/kubelet"
  wait_for "node $NODE" 120 kc get node "$NODE"
  kc wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null
}

start_controllers() {
  local name
  for name in scheduler controller-manager; do
    set -- --kubeconfig "$STATE/$name.kubeconfig" --authentication-kubeconfig "$STATE/$name.kubeconfig" \
      --authorization-kubeconfig "$STATE/$name.kubeconfig" --authentication-skip-lookup=true \
      --bind-address 127.0.0.1 --leader-elect=false
    if [ $name = scheduler ]; then
      start kube-scheduler "$BIN/kube-scheduler" "$@" --secure-port "$SCHEDULER_PORT"
    else
      start kube-controller-manager "$BIN/kube-controller-manager" "$@" --secure-port "$CM_PORT" \
        --flex-volume-plugin-dir "$STATE/volume-plugins" --use-service-account-credentials=true \
        --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
        --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key"
    fi
  done
  # Pods are admitted once their namespace's ServiceAccount exists.
  wait_for "the default ServiceAccount" 120 kc -n default get serviceaccount default
}

up() {
  [ "$(id -u)" = 0 ] || die "up needs root (kubelet, containerd, network namespaces)"
  local t0=$SECONDS t
  ensure_packages
  build
  build_pause
  log "binaries ready in $((SECONDS - t0))s ($BIN)"
  mkdir -p "$STATE"
  echo "$BIN" >"$STATE/bin"
  t=$SECONDS
  pki
  start_etcd
  start_apiserver
  log "kube-apiserver ready in $((SECONDS - t))s"
  t=$SECONDS
  start_containerd
  start_kubelet
  log "node Ready in $((SECONDS - t))s"
  t=$SECONDS
  start_controllers
  log "scheduler and controller-manager ready in $((SECONDS - t))s; up in $((SECONDS - t0))s"
  echo "KUBECONFIG=$KUBECONFIG_ADMIN"
}

down() {
  [ -d "$STATE" ] || return 0
  [ -s "$STATE/bin" ] && BIN=$(cat "$STATE/bin")
  # Pods first, through the kubelet: it stops their sandboxes, which removes
  # their network namespaces and mounts.
  if pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null; then
    kc delete pods --all --all-namespaces --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
    local end=$((SECONDS + 40))
    while [ $SECONDS -lt $end ] && [ -n "$(ctr_ tasks ls -q 2>/dev/null)" ]; do sleep 0.5; done
  fi
  stop kube-controller-manager
  stop kube-scheduler
  stop kubelet
  # Whatever is left in our containerd: kill it, note its network namespace.
  local id ns shim shims=""
  # containerd 1.6 writes no PID file for a shim, only for its container's init
  # process (init.pid in the task's bundle); the shim is that process's parent.
  for id in "$CTRD"/state/io.containerd.runtime.v2.task/*/*/init.pid; do
    [ -s "$id" ] && shims+=" $(awk '/^PPid:/ {print $2}' "/proc/$(cat "$id")/status" 2>/dev/null)"
  done
  if pid_of containerd >/dev/null; then
    for id in $(ctr_ containers ls -q 2>/dev/null); do
      ns=$(ctr_ containers info "$id" 2>/dev/null | grep -o '"/var/run/netns/cni-[^"]*"' | tr -d '"' | head -1) || true
      [ -z "$ns" ] || echo "$ns" >>"$STATE/netns.left"
      ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr_ containers ls -q 2>/dev/null); do
      ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
      ctr_ containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims outlive containerd: kill those still serving our socket.
  for shim in $shims; do
    tr '\0' ' ' <"/proc/$shim/cmdline" 2>/dev/null | grep -qF -- "-address $CTRD_SOCK " && kill -KILL "$shim" || true
  done
  for ns in $(sort -u "$STATE/netns.left" 2>/dev/null); do
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  stop kube-apiserver
  stop etcd
  # Mounts under the state dir (kubelet volumes, containerd rootfs), deepest first.
  local m
  for m in $(awk -v s="$STATE/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # The kubelet's cgroups (cgroupfs driver): <hierarchy>/kubepods/…
  for m in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  bridge_forward -D
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  if [ -s "$STATE/host.saved" ]; then
    for l in /var/log/containers/*.log; do # the kubelet's symlinks into our pod logs
      [ -L "$l" ] && [[ $(readlink "$l") == "$STATE"/* ]] && rm -f "$l"
    done
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
    local p
    for p in "${HOST_PATHS[@]}"; do
      grep -qx "path $p" "$STATE/host.saved" || rmdir "$p" 2>/dev/null || true
    done
    sed -n 's/^sysctl //p' "$STATE/host.saved" | while read -r kv; do sysctl -qw "$kv" || true; done
  fi
  if grep -qF " $STATE/" /proc/self/mountinfo; then
    log "mounts are left under $STATE; not removing it"
  else
    rm -rf --one-file-system "$STATE"
  fi
  log "down"
}

# running reports whether the cluster answers: its API server is ready and
# its node is Ready.
running() {
  pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null &&
    curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
      "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1
}

# now prints the time in seconds with milliseconds; since prints the seconds
# elapsed since $1 (a `now`).
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# measure prints, one `name seconds` line each on stdout, how long the cluster
# takes to build, start and run a pod:
#   cold_build    (HOIST_MEASURE_COLD=1 only: minutes, 4 GB of scratch) the
#                 binaries built into an empty cache with an empty GOCACHE
#                 (the Go module cache is kept)
#   start_cached  `up` with no state and the binaries cached
#   start_again   `up` while the cluster runs (a no-op)
#   kubectl_run   `kubectl run --rm -i` of the busybox image running `echo`,
#                 from the command to its exit (three times)
#   stop          `down`
# It starts and stops the cluster itself (holding the lock), so with a cluster
# already up (others may be using it) it measures kubectl_run only.
measure() {
  local t i out was_up=0
  running && was_up=1
  [ $was_up = 1 ] || lock_state
  if [ "${HOIST_MEASURE_COLD:-}" = 1 ]; then
    local scratch
    scratch=$(mktemp -d)
    t=$(now)
    HOIST_K8S_CACHE="$scratch/cache" GOCACHE="$scratch/gocache" bash "$0" build 8>&- 9>&-
    echo "cold_build $(since "$t")"
    rm -rf "$scratch"
  fi
  if [ $was_up = 1 ]; then
    log "the cluster is up (others may use it): its start and stop are not measured"
  else
    build
    build_pause
    t=$(now)
    (up >/dev/null)
    echo "start_cached $(since "$t")"
    t=$(now)
    (up >/dev/null)
    echo "start_again $(since "$t")"
  fi
  [ -s "$STATE/bin" ] && BIN=$(cat "$STATE/bin")
  for i in 1 2 3; do
    t=$(now)
    out=$(kc run "measure-$$-$i" --image="$TEST_IMAGE" --image-pull-policy=IfNotPresent --restart=Never \
      --rm -i --quiet --command -- echo hello 2>&1) || die "kubectl run: $out"
    echo "kubectl_run $(since "$t")"
    grep -qx hello <<<"$out" || die "kubectl run printed: $out"
  done
  if [ $was_up = 0 ]; then
    t=$(now)
    (down)
    echo "stop $(since "$t")"
  fi
}

case "${1:-}" in
up)
  lock_state
  up
  ;;
down)
  lock_state
  down
  ;;
status)
  running || { log "no cluster answers (state $STATE)"; exit 1; }
  echo "KUBECONFIG=$KUBECONFIG_ADMIN"
  ;;
import)
  shift
  [ $# -gt 0 ] || die "usage: $0 import IMAGE…"
  lock_state
  running || die "no cluster answers (state $STATE); start it with: $0 up"
  for img in "$@"; do import_image "$img"; done
  ;;
build)
  ensure_packages
  build
  build_pause
  ;;
packages) missing_packages ;;
measure) measure ;;
kubectl)
  shift
  [ -s "$STATE/bin" ] && BIN=$(cat "$STATE/bin")
  kc "$@"
  ;;
*)
  sed -n '2,14p' "$0" >&2
  exit 2
  ;;
esac
