#!/usr/bin/env bash
# generate.sh regenerates the committed Go code of internal/bridge/remote/remote.proto (the vcluster
# plugin v1 wire protocol: remote.pb.go, remote_grpc.pb.go) and of
# internal/bridgev2/pluginv2/pluginv2.proto (plugin v2: pluginv2.pb.go, pluginv2_grpc.pb.go). The normal build and test path
# never needs it; run it (`make generate`) after changing the .proto.
#
# Reproducible: protoc is Debian's protobuf-compiler (installed with apt-get when protoc is
# missing; the committed code was made with libprotoc 3.21.12), and the two Go plugins are
# installed from the Go module proxy at the pinned versions below into ./bin.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc
PROTOC_WANT=3.21.12
export GOFLAGS=${GOFLAGS:--buildvcs=false}
BIN="$PWD/bin"
mkdir -p "$BIN"

if ! command -v protoc >/dev/null; then
  echo "protoc not found: installing Debian's protobuf-compiler" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get install -y protobuf-compiler >&2 || { $SUDO apt-get update >&2 && $SUDO apt-get install -y protobuf-compiler >&2; }
fi
have=$(protoc --version | awk '{print $2}')
if [ "$have" != "$PROTOC_WANT" ]; then
  echo "warning: protoc $have, the committed code was generated with $PROTOC_WANT: the version comment will differ" >&2
fi

if ! "$BIN/protoc-gen-go" --version 2>/dev/null | grep -q "${PROTOC_GEN_GO_VERSION}$"; then
  GOBIN="$BIN" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if ! "$BIN/protoc-gen-go-grpc" --version 2>/dev/null | grep -q "${PROTOC_GEN_GO_GRPC_VERSION#v}$"; then
  GOBIN="$BIN" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

PATH="$BIN:$PATH" protoc -I internal/bridge/remote \
  --go_out=internal/bridge/remote --go_opt=paths=source_relative \
  --go-grpc_out=internal/bridge/remote --go-grpc_opt=paths=source_relative \
  internal/bridge/remote/remote.proto
PATH="$BIN:$PATH" protoc -I internal/bridgev2/pluginv2 \
  --go_out=internal/bridgev2/pluginv2 --go_opt=paths=source_relative \
  --go-grpc_out=internal/bridgev2/pluginv2 --go-grpc_opt=paths=source_relative \
  internal/bridgev2/pluginv2/pluginv2.proto
echo "generated internal/bridge/remote/*.pb.go and internal/bridgev2/pluginv2/*.pb.go" >&2
