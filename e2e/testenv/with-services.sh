#!/usr/bin/env bash
# Runs a command with the services the tests use: a throwaway PostgreSQL
# cluster on a free loopback port (HOIST_TEST_POSTGRES), stopped afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${HOIST_TEST_POSTGRES:-}" ] && [ -f "$here/postgres.sh" ]; then
  eval "$(bash "$here/postgres.sh" start)"
  trap 'bash "$here/postgres.sh" stop >/dev/null 2>&1 || true' EXIT
fi
"$@"
