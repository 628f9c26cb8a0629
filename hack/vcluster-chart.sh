#!/usr/bin/env bash
# vcluster-chart.sh prints (last line of stdout) the directory of the vcluster Helm chart of
# vcluster $VCLUSTER_VERSION (default v0.36.1): the chart/ folder of the
# github.com/loft-sh/vcluster Go module, downloaded from the Go module proxy into the module
# cache if it is not there yet. The chart tests (chart_test.go) read it as
# SYNCHOOK_VCLUSTER_CHART. It runs from a temporary directory so that our go.mod and go.sum
# are neither read nor changed.
set -euo pipefail

VCLUSTER_VERSION=${VCLUSTER_VERSION:-v0.36.1}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json=$(cd "$tmp" && GOWORK=off GOFLAGS='' go mod download -json "github.com/loft-sh/vcluster@$VCLUSTER_VERSION")
# The "Dir" line of `go mod download -json`, e.g.  "Dir": "/root/go/pkg/mod/github.com/...",
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$dir" ]; then
  echo "vcluster-chart.sh: no Dir in the output of go mod download:" >&2
  printf '%s\n' "$json" >&2
  exit 1
fi
chart="$dir/chart"
if [ ! -f "$chart/Chart.yaml" ]; then
  echo "vcluster-chart.sh: $chart/Chart.yaml not found" >&2
  exit 1
fi
echo "$chart"
