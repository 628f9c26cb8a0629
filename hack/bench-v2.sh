#!/usr/bin/env bash
# bench-v2.sh compares the in-process v2 benchmark (internal/bridgev2 BenchmarkV2Mutate) of this
# tree with that of an older build, interleaved: each round runs the benchmark once (-count 1)
# in the old build, then once here, so that load from elsewhere on the machine falls on both
# alike; then benchstat compares ns/op, cpu-ns/op (CPU time of the process per op, the steadier
# figure on a shared machine) and allocs/op.
#
# Usage: hack/bench-v2.sh [ROUNDS] [OLD_COMMIT]   (defaults: 10 rounds, 362c52b)
#        BENCH='BenchmarkV2Mutate/.*/server' hack/bench-v2.sh   # the plugins' own work only (~10 s a round)
#
# The old build is checked out as a detached worktree in ${BENCH_OLD_TREE:-/tmp/synchook-362c52b}.
# At 362c52b the v2 bridge is bridgev2/ (today internal/bridgev2/) and its benchmark lacks the
# as-deployed variant and cpu-ns/op: hack/bench/v2mutate-362c52b.patch ports them (the same
# measurement as here, with that build's ServePluginV2 options and no undo key, which that build
# did not have). Results go to ${BENCH_OUT:-/tmp/synchook-bench-v2}: old.txt, new.txt,
# benchstat.txt. The command needs about 40 s per round.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-10}
old=${2:-362c52b}
tree=${BENCH_OLD_TREE:-/tmp/synchook-$old}
out=${BENCH_OUT:-/tmp/synchook-bench-v2}
export GOFLAGS=${GOFLAGS:--buildvcs=false}
mkdir -p "$out"

if [ ! -d "$tree" ]; then
  git worktree add --detach "$tree" "$old"
fi
oldpkg=./internal/bridgev2
if [ -d "$tree/bridgev2" ]; then
  oldpkg=./bridgev2
  patch=$PWD/hack/bench/v2mutate-$old.patch
  if [ -f "$patch" ] && ! grep -q '"/server"' "$tree/bridgev2/bench_test.go"; then
    git -C "$tree" apply "$patch"
  fi
fi
(cd "$tree" && go test -c -o "$out/old.test" "$oldpkg")
go test -c -o "$out/new.test" ./internal/bridgev2

run() { # run NAME: one -count 1 run of the test binary NAME.test, appended to NAME.txt
  "$out/$1.test" -test.run '^$' -test.bench "${BENCH:-BenchmarkV2Mutate}" -test.count 1 -test.benchmem 2>/dev/null |
    grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$out/$1.txt"
}
rm -f "$out/old.txt" "$out/new.txt"
for i in $(seq 1 "$rounds"); do
  echo "round $i of $rounds" >&2
  run old
  run new
done
# The package path differs between the builds: benchstat compares by benchmark name.
sed -i 's/^pkg: .*/pkg: bridgev2/' "$out/old.txt" "$out/new.txt"
go run golang.org/x/perf/cmd/benchstat@latest "$out/old.txt" "$out/new.txt" | tee "$out/benchstat.txt"
