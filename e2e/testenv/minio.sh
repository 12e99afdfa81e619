#!/usr/bin/env bash
# Starts and stops a throwaway MinIO (a real S3-compatible server) on a free
# 127.0.0.1 port, for the tests of the S3 artifact store (store/blob).
#
#   eval "$(e2e/testenv/minio.sh start)"   # prints the export lines of HOIST_TEST_S3_*
#   e2e/testenv/minio.sh env               # prints the export lines of a running server
#   e2e/testenv/minio.sh stop              # stops the server and removes its directory
#   e2e/testenv/minio.sh run -- CMD ARGS…  # runs CMD with HOIST_TEST_S3_* set; stops
#                                          # the server afterwards if `run` started it
#   e2e/testenv/minio.sh build             # only builds the binary into the cache
#
# The binary is built with `go install` from the Go module proxy (MinIO tags
# its releases RELEASE.<date>, which Go sees as the pseudo-version below) into
# $HOIST_MINIO_CACHE (default ~/.cache/hoist/minio), once per version; the
# first build takes a few minutes. The server lives in $HOIST_MINIO_DIR
# (default /tmp/hoist-test-minio; `run` without it makes a directory of its
# own, /tmp/hoist-test-minio.XXXXXX): one drive, fixed test credentials, the
# bucket $BUCKET created at start, no console, no update checks. `start` is
# idempotent: when the server already runs it only prints the export lines.
# Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail

# MinIO RELEASE.2026-02-12T20-18-48Z.
MINIO_VERSION="${HOIST_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
CACHE="${HOIST_MINIO_CACHE:-$HOME/.cache/hoist/minio}"
BIN="$CACHE/$MINIO_VERSION/minio"
DIR="${HOIST_MINIO_DIR:-/tmp/hoist-test-minio}"
ACCESS_KEY=hoist-test
SECRET_KEY=hoist-test-secret
BUCKET=hoist-test

log() { echo "minio.sh: $*" >&2; }
die() { echo "minio.sh: $*" >&2; exit 1; }

# build installs the MinIO binary into the cache unless it is there, under
# a lock so that two callers build it once.
build() {
  [ -x "$BIN" ] && return 0
  mkdir -p "$CACHE/$MINIO_VERSION"
  exec 8>>"$CACHE/$MINIO_VERSION.lock"
  flock 8
  if [ ! -x "$BIN" ]; then
    log "go install github.com/minio/minio@$MINIO_VERSION (the first build takes minutes)"
    local t=$SECONDS tmp
    tmp=$(mktemp -d "$CACHE/$MINIO_VERSION/build.XXXXXX")
    # MinIO's go.mod has no replace directives, so `go install` builds it
    # as published; -mod=mod lets it resolve its own go.sum.
    if ! (cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="-mod=mod -buildvcs=false" \
      go install -trimpath -ldflags "-s -w" "github.com/minio/minio@$MINIO_VERSION") 8>&- 9>&-; then
      rm -rf "$tmp"
      die "building MinIO failed"
    fi
    mv "$tmp/minio" "$BIN"
    rm -rf "$tmp"
    log "built MinIO in $((SECONDS - t)) s ($BIN)"
  fi
  flock -u 8
  exec 8>&-
}

running() {
  [ -f "$DIR/pid" ] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null && [ -f "$DIR/endpoint" ]
}

print_env() {
  echo "export HOIST_TEST_S3_ENDPOINT=$(cat "$DIR/endpoint")"
  echo "export HOIST_TEST_S3_BUCKET=$BUCKET"
  echo "export HOIST_TEST_S3_ACCESS_KEY=$ACCESS_KEY"
  echo "export HOIST_TEST_S3_SECRET_KEY=$SECRET_KEY"
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# s3 sends one signed S3 request with curl (AWS Signature V4, curl ≥ 7.75).
s3() {
  local method=$1 path=$2
  curl -sS --fail-with-body --max-time 10 -X "$method" \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    "$(cat "$DIR/endpoint")$path"
}

start() {
  if running; then
    print_env
    return 0
  fi
  command -v curl >/dev/null || die "curl not found (apt-get install curl)"
  build
  stop_server
  rm -rf "$DIR"
  mkdir -p "$DIR/data"
  local port attempt pid i
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 30000))
    port_free "$port" || continue
    # Its own session, so that the test run's signals do not reach it
    # before `stop`; the lock fds stay behind.
    MINIO_ROOT_USER=$ACCESS_KEY MINIO_ROOT_PASSWORD=$SECRET_KEY \
      MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
      setsid "$BIN" server --quiet --anonymous --address "127.0.0.1:$port" \
      "$DIR/data" >"$DIR/server.log" 2>&1 </dev/null 8>&- 9>&- &
    pid=$!
    echo "$pid" >"$DIR/pid"
    echo "http://127.0.0.1:$port" >"$DIR/endpoint"
    for i in $(seq 300); do
      kill -0 "$pid" 2>/dev/null || break
      if curl -sf --max-time 1 "http://127.0.0.1:$port/minio/health/ready" >/dev/null 2>&1; then
        # Ready can come before the object layer is: S3 calls answer 503
        # (XMinioServerNotInitialized) for a moment, so the bucket is
        # asked for until it exists, for at most 30 s.
        local made=0
        for _ in $(seq 150); do
          if s3 PUT "/$BUCKET" >/dev/null 2>"$DIR/bucket.err"; then made=1; break; fi
          sleep 0.2
        done
        [ "$made" = 1 ] || { cat "$DIR/bucket.err" >&2; die "creating bucket $BUCKET failed"; }
        log "MinIO listening on 127.0.0.1:$port (data in $DIR/data, bucket $BUCKET)"
        print_env
        return 0
      fi
      sleep 0.1
    done
    stop_server
    log "start on port $port failed (attempt $attempt), retrying"
  done
  tail -n 30 "$DIR/server.log" >&2 || true
  exit 1
}

# stop_server ends the server by its PID file and waits for it to exit.
stop_server() {
  [ -f "$DIR/pid" ] || return 0
  local pid i
  pid=$(cat "$DIR/pid")
  if kill -TERM "$pid" 2>/dev/null; then
    for i in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/pid"
}

stop() {
  stop_server
  rm -rf "$DIR"
}

[ "${1:-}" = build ] && { build; exit 0; }

# `run` without HOIST_MINIO_DIR gets a server of its own, so that test runs
# side by side never stop each other's server.
private=0
if [ "${1:-}" = run ] && [ -z "${HOIST_MINIO_DIR:-}" ]; then
  DIR=$(mktemp -d /tmp/hoist-test-minio.XXXXXX)
  private=1
fi

# One start/stop at a time (several test runs may call start at once).
exec 9>"${DIR}.lock"
flock 9

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  run)
    shift
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || { echo "usage: $0 run -- CMD [ARGS…]" >&2; exit 2; }
    started=0
    running || started=1
    # A server this run starts is stopped however the run ends.
    cleanup() {
      if [ "$started" = 1 ]; then
        flock 9
        stop
      fi
      [ "$private" = 1 ] && rm -f "${DIR}.lock"
      return 0
    }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    env_lines=$(start) || exit 1
    eval "$env_lines"
    flock -u 9
    rc=0
    "$@" 9>&- || rc=$?
    exit "$rc"
    ;;
  env)
    running || die "no server running in $DIR"
    print_env
    ;;
  *)
    echo "usage: $0 start|stop|env|build|run -- CMD…" >&2
    exit 2
    ;;
esac
