#!/usr/bin/env bash
# test.sh runs every check and test of synchook on a fresh machine: it installs what the tests
# need (golangci-lint from the Go module proxy, kube-apiserver + etcd built from the Go module
# proxy by hack/envtest-assets.sh), then runs gofmt, go vet, golangci-lint, the unit tests (with
# the race detector), the examples, the end-to-end tests against a real kube-apiserver and the
# end-to-end tests with vcluster's own plugin manager.
#
# Environment: SKIP_LINT=1 skips golangci-lint; GO_TEST_FLAGS adds flags to go test; FUZZTIME
# sets how long each fuzz target runs, as go test's -fuzztime (default 20000x: a count of
# executions, about 10 s each here). A duration would race Go 1.26's fuzz coordinator at its
# deadline and fail a target with a bare "context deadline exceeded" and no crasher
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
set -euo pipefail
cd "$(dirname "$0")/.."

GOLANGCI_LINT_VERSION=v2.15.0
export GOFLAGS=${GOFLAGS:--buildvcs=false}
BIN="$PWD/bin"
mkdir -p "$BIN"
start=$(date +%s)
step_name= step_start=
# step ends the running step (end_step) and starts the next: it prints the header and starts the
# step's clock.
step() {
  end_step
  step_name=$* step_start=$(date +%s)
  printf '\n==> %s\n' "$*" >&2
}
# end_step prints how many seconds the running step took ("<== tools: 123s"), once: the header up
# to its first comma or parenthesis names it. Called with an exit status (the EXIT trap, when a
# step fails), it adds that.
end_step() {
  if [ -n "$step_name" ]; then
    local name=${step_name%%[,(]*}
    printf '<== %s: %ss%s\n' "${name% }" $(( $(date +%s) - step_start )) "${1:+ (failed, exit $1)}" >&2
    step_name=
  fi
}
trap 'rc=$?; if [ "$rc" != 0 ]; then end_step "$rc"; fi' EXIT

step "tools"
if ! "$BIN/golangci-lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v}"; then
  GOBIN="$BIN" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi
KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh | tail -n 1)
export KUBEBUILDER_ASSETS
echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
# helm (built from the module proxy) and the real vcluster chart (inside the vcluster Go module)
# for chart_test.go.
SYNCHOOK_HELM=$(hack/helm.sh | tail -n 1)
SYNCHOOK_VCLUSTER_CHART=$(hack/vcluster-chart.sh | tail -n 1)
export SYNCHOOK_HELM SYNCHOOK_VCLUSTER_CHART
echo "SYNCHOOK_HELM=$SYNCHOOK_HELM SYNCHOOK_VCLUSTER_CHART=$SYNCHOOK_VCLUSTER_CHART" >&2

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi

step "go vet"
go vet ./...

if [ "${SKIP_LINT:-}" != 1 ]; then
  step "golangci-lint $GOLANGCI_LINT_VERSION"
  # serialised around golangci-lint's lock: without it a second make test on the machine (another
  # clone) fails at once with "parallel golangci-lint is running"
  "$BIN/golangci-lint" run --allow-serial-runners ./...
fi

step "unit tests (race detector)"
go test -race -count=1 ${GO_TEST_FLAGS:-} $(go list ./... | grep -v -e /e2e -e /internal/testenv)

step "fuzz targets, ${FUZZTIME:-20000x} each (their corpora under testdata/fuzz run as regression cases above)"
for target in patch:FuzzDiff patch:FuzzDiffTyped patch:FuzzMarshal internal/engine:FuzzRun internal/engine:FuzzMetadataPath internal/engine:FuzzUndo internal/undo:FuzzUndoEntries internal/jsonscan:FuzzScan webhook:FuzzAdmissionReview config:FuzzParse internal/bridge:FuzzMutate internal/answer:FuzzAnswer internal/answer:FuzzSplice internal/undo:FuzzDocEdits internal/jsondoc:FuzzApplyOps hookclient:FuzzApplyToMetadata builtin:FuzzStripTyped builtin:FuzzImageRewrite internal/engine:FuzzStripDoc internal/decode:FuzzDecode internal/hoststore:FuzzReadOfWhatTheHostStores; do
  go test -run XXX -fuzz "^${target#*:}\$" -fuzztime "${FUZZTIME:-20000x}" "./${target%%:*}/"
done

step "benchmarks, briefly (so they cannot rot), and the load command with tiny bounds"
go test -run XXX -short -bench . -benchtime 100x ./internal/engine/ ./patch/ ./webhook/ ./internal/bridgev2/ ./internal/capture/ ./internal/bench/ >/dev/null
go run ./cmd/synchook-bench bench --max-requests 100 --max-duration 200ms >/dev/null
# deadline: two at once (its slot count only means something when requests outlast their arrival)
go run ./cmd/synchook-bench deadline --tolerations 1000 --parallel 2 --rounds 1 --grace 5s >/dev/null

step "synchook test examples/ (test files of plugin.yaml, the features, the policies, Kyverno's ported scenarios)"
go run . test examples/

step "examples: each its own module built on package plugin (vet, build, test, and its own synchook test)"
hack/test-examples.sh

step "end-to-end tests (real kube-apiserver + etcd)"
go test -count=1 -timeout 20m ${GO_TEST_FLAGS:-} ./e2e/...

step "vcluster's own plugin v2 manager against the built binary (e2e/vcluster, its own Go module)"
# Four loft-sh modules are missing from the checksum database; go.sum pins them.
(cd e2e/vcluster && GONOSUMDB=github.com/loft-sh go vet ./... && GONOSUMDB=github.com/loft-sh go test -count=1 -timeout 30m ${GO_TEST_FLAGS:-} ./...)

end_step
printf '\n==> all passed in %ss\n' $(( $(date +%s) - start )) >&2
