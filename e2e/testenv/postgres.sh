#!/usr/bin/env bash
# Starts and stops a throwaway PostgreSQL 15 cluster (Debian's `postgresql`
# package) on a free 127.0.0.1 port, for the tests that need a real Postgres.
#
#   eval "$(e2e/testenv/postgres.sh start)"   # prints: export HOIST_TEST_POSTGRES=postgres://…
#   e2e/testenv/postgres.sh env               # prints the export line of a running cluster
#   e2e/testenv/postgres.sh stop              # stops the cluster and removes its directory
#   e2e/testenv/postgres.sh run -- CMD ARGS…  # runs CMD with HOIST_TEST_POSTGRES set; stops
#                                             # the cluster afterwards if `run` started it
#
# The cluster lives in $HOIST_PG_DIR (default /tmp/hoist-test-pg; `run` without
# it makes a directory of its own, /tmp/hoist-test-pg.XXXXXX). `start` is
# idempotent: when the cluster already runs it only prints the export line.
# initdb refuses to run as root, so as root the server runs as the `postgres`
# user through runuser. Durability is switched off (fsync=off): test data only.
# Progress goes to stderr; stdout carries only the export line.
set -euo pipefail

DIR="${HOIST_PG_DIR:-/tmp/hoist-test-pg}"
DATA="$DIR/data"
PGBIN="${HOIST_PG_BIN:-/usr/lib/postgresql/15/bin}"
RUNAS=postgres

# Runs a PostgreSQL tool as the cluster owner, without the script's lock fd
# (the server would otherwise inherit it and hold the lock while it runs).
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$RUNAS" -- "$@" 9>&-
  else
    "$@" 9>&-
  fi
}

running() {
  [ -f "$DATA/postmaster.pid" ] && as_owner "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

print_env() {
  echo "export HOIST_TEST_POSTGRES=$(cat "$DIR/dsn")"
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  if running && [ -f "$DIR/dsn" ]; then
    print_env
    return 0
  fi
  if [ ! -x "$PGBIN/initdb" ]; then
    echo "postgres.sh: $PGBIN/initdb not found (apt-get install postgresql)" >&2
    exit 1
  fi
  rm -rf "$DIR"
  mkdir -p "$DIR"
  if [ "$(id -u)" = 0 ]; then
    chown "$RUNAS" "$DIR"
  fi
  as_owner "$PGBIN/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 ||
    { cat "$DIR/initdb.log" >&2; exit 1; }
  local port attempt
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + RANDOM % 30000 ))
    port_free "$port" || continue
    if as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $port -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=128MB -c timezone=UTC" \
      start >&2; then
      echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable" >"$DIR/dsn"
      echo "postgres.sh: PostgreSQL 15 listening on 127.0.0.1:$port (data in $DATA)" >&2
      print_env
      return 0
    fi
    echo "postgres.sh: start on port $port failed (attempt $attempt), retrying" >&2
  done
  tail -n 30 "$DIR/server.log" >&2 || true
  exit 1
}

stop() {
  if running; then
    as_owner "$PGBIN/pg_ctl" -D "$DATA" -m immediate -w stop >&2
  fi
  rm -rf "$DIR"
}

# `run` without HOIST_PG_DIR gets a cluster of its own, so that test runs side
# by side never stop each other's server.
private=0
if [ "${1:-}" = run ] && [ -z "${HOIST_PG_DIR:-}" ]; then
  DIR=$(mktemp -d /tmp/hoist-test-pg.XXXXXX)
  DATA="$DIR/data"
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
    env_line=$(start) || exit 1
    eval "$env_line"
    flock -u 9
    rc=0
    "$@" 9>&- || rc=$?
    if [ "$started" = 1 ]; then
      flock 9
      stop
    fi
    [ "$private" = 1 ] && rm -f "${DIR}.lock"
    exit "$rc"
    ;;
  env)
    running || { echo "postgres.sh: no cluster running in $DIR" >&2; exit 1; }
    print_env
    ;;
  *)
    echo "usage: $0 start|stop|env|run -- CMD…" >&2
    exit 2
    ;;
esac
