#!/usr/bin/env bash
# envtest-assets.sh builds the kube-apiserver and etcd binaries that envtest needs, from the Go
# module proxy only (no prebuilt downloads), caches them, and prints the KUBEBUILDER_ASSETS
# directory on stdout (progress goes to stderr).
#
# Versions follow controller-runtime's envtest: k8s.io/kubernetes v1.37.0 and etcd v3.7.3.
# Cache: ${SYNCHOOK_ASSETS_CACHE:-$HOME/.cache/synchook/envtest}/k8s-<ver>-etcd-<ver>.
# A cold build takes ~5-10 minutes and ~2.5 GB of RAM; a cached run returns at once.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.0}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
CACHE_ROOT=${SYNCHOOK_ASSETS_CACHE:-$HOME/.cache/synchook/envtest}
DIR="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$DIR"

export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { echo "envtest-assets: $*" >&2; }

exec 9>"$CACHE_ROOT/.lock"
flock 9

build_apiserver() {
  if [ -x "$DIR/kube-apiserver" ] && [ "$("$DIR/kube-apiserver" --version 2>/dev/null)" = "kube-apiserver $K8S_VERSION" ]; then
    return
  fi
  log "building kube-apiserver $K8S_VERSION (cold: several minutes)"
  local work="$CACHE_ROOT/src/kube-apiserver-$K8S_VERSION"
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  local kgomod goline
  kgomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  goline=$(grep -m1 '^go ' "$kgomod")
  {
    echo "module synchook.local/kube-apiserver"
    echo
    echo "$goline"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "tool k8s.io/kubernetes/cmd/kube-apiserver"
    echo
    # every k8s.io module that kubernetes replaces with ./staging/... gets its published twin
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$kgomod" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >go.mod
  go mod tidy >&2
  go build -trimpath -o "$DIR/kube-apiserver.tmp" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
    -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=${STAGING_VERSION#v0.} \
    -X k8s.io/component-base/version/verflag.programName=kube-apiserver" \
    k8s.io/kubernetes/cmd/kube-apiserver
  mv "$DIR/kube-apiserver.tmp" "$DIR/kube-apiserver"
}

build_etcd() {
  if [ -x "$DIR/etcd" ] && [[ "$("$DIR/etcd" --version 2>/dev/null)" == *"etcd Version: ${ETCD_VERSION#v}"* ]]; then
    return
  fi
  log "building etcd $ETCD_VERSION"
  local work="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  cat >go.mod <<GOMOD
module synchook.local/etcd

go 1.25

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$DIR/etcd.tmp" .
  mv "$DIR/etcd.tmp" "$DIR/etcd"
}

start=$(date +%s)
build_etcd
build_apiserver
log "assets ready in $(( $(date +%s) - start ))s: $DIR"
echo "$DIR"
