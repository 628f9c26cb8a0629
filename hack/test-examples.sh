#!/usr/bin/env bash
# test-examples.sh checks every example under examples/ that is its own Go module (has a
# go.mod): go vet, go build and go test for each, one after the other. The examples require
# github.com/synchook/synchook with a replace to this checkout, so this proves that a hook
# author's module built on package plugin compiles and works against the current tree.
#
# Usage: hack/test-examples.sh
# Environment: GO_TEST_FLAGS adds flags to go test (e.g. -v or -run NAME).
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS=-buildvcs=false
export GOWORK=off
start=$(date +%s)

found=0
for dir in examples/*/; do
  dir=${dir%/}
  [[ -f "$dir/go.mod" ]] || continue
  found=$((found + 1))
  printf '\n==> %s\n' "$dir" >&2
  # One && chain: errexit does not apply inside a command whose status is tested (the if).
  # shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
  if ! (
    cd "$dir" &&
      echo "--- go vet ./..." >&2 && go vet ./... &&
      # -o /dev/null: in a module with one main package, go build ./... would write a binary.
      echo "--- go build ./..." >&2 && go build -o /dev/null ./... &&
      echo "--- go test -count=1 ./..." >&2 && go test -count=1 ${GO_TEST_FLAGS:-} ./... &&
      # its own test files, with its own binary (its Go hooks): synchook test, as the program
      # (--root ..: the examples share examples/pod.yaml, outside the module's directory)
      { [ -z "$(ls synchook-test.yaml ./*.synchook-test.yaml 2>/dev/null)" ] || { echo "--- go run . test --root .." >&2 && go run . test --root ..; }; }
  ); then
    echo "FAIL: $dir" >&2
    exit 1
  fi
done

if [[ $found -eq 0 ]]; then
  echo "no example module (examples/*/go.mod) found" >&2
  exit 1
fi
printf '\n==> %d examples OK in %ds\n' "$found" "$(($(date +%s) - start))" >&2
