#!/usr/bin/env bash
# Fails, naming the files, when a hand-written Go file is not gofmt-formatted.
set -euo pipefail
files=$(git ls-files '*.go' | grep -v '_templ.go$' || true)
bad=$(gofmt -l $files)
if [ -n "$bad" ]; then
  echo "gofmt would change:" >&2
  echo "$bad" >&2
  exit 1
fi
