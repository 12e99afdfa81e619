#!/usr/bin/env bash
# Runs a command with the services the tests use: a throwaway PostgreSQL
# cluster on a free loopback port (HOIST_TEST_POSTGRES), stopped afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${HOIST_TEST_POSTGRES:-}" ]; then
  exec "$@"
fi
exec bash "$here/postgres.sh" run -- "$@"
