#!/usr/bin/env bash
# Creates the quickstart spec repository (a real Git repository seeded from the
# sample specs) unless it exists already, and says how to use it.
set -euo pipefail
repo="$1"
seed="$2"
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  cp -r "$seed"/. "$repo"/
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" -c user.name=hoist -c user.email=hoist@localhost commit -q -m "Quickstart specs"
fi
echo "spec repository: $repo (commit to it; hoist syncs each commit)"
