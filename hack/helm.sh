#!/usr/bin/env bash
# helm.sh makes sure ./bin/helm is helm $HELM_VERSION (default v3.22.0), building it with
# `go install` from the Go module proxy when it is missing or reports another version, and
# prints its path as the last line of stdout (progress goes to stderr). hack/test.sh passes it
# to the chart tests (chart_test.go) as SYNCHOOK_HELM.
#
# The build uses the -ldflags of helm's own Makefile so that the binary matches a release: it
# reports its version, and `helm template` assumes the Kubernetes version of helm's client-go
# (v1.37 for helm v3.22.0) rather than the v1.20 compiled-in fallback, which charts test (the
# vcluster chart does, in its StatefulSet and Role). A cold build takes about 4 minutes; a
# cached run returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=${HELM_VERSION:-v3.22.0}
BIN="$PWD/bin"
HELM="$BIN/helm"

if [ "$("$HELM" version --template '{{.Version}}' 2>/dev/null || true)" != "$HELM_VERSION" ]; then
  echo "helm.sh: installing helm $HELM_VERSION into $BIN (go install from the module proxy)" >&2
  mkdir -p "$BIN"
  # Outside our module (a temp dir, GOWORK=off) so that our go.mod and go.sum stay untouched.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # helm's go.mod names the client-go it is built with; the Makefile derives the default
  # Kubernetes version from it (client-go v0.X.Y -> Kubernetes v1.X).
  gomod=$(cd "$tmp" && GOWORK=off GOFLAGS='' go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  k8s_minor=$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -n 1)
  if [ -z "$k8s_minor" ]; then
    echo "helm.sh: no k8s.io/client-go version in $gomod" >&2
    exit 1
  fi
  ldflags="-w -s -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  (cd "$tmp" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$BIN" \
    go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  got=$("$HELM" version --template '{{.Version}}')
  if [ "$got" != "$HELM_VERSION" ]; then
    echo "helm.sh: the built helm reports version $got, want $HELM_VERSION" >&2
    exit 1
  fi
fi
echo "$HELM"
