#!/usr/bin/env bash
# bench-request.sh measures internal/bridge's BenchmarkRequest — one request of the v2
# plugin's own work (bridge.Mutator) on the ~5 KiB Pod with a sealed undo: a typed Go hook, a
# strip and a labels hook, each write and its read — and "floor", a typed decode + encode of the
# same Pod, interleaved with the same benchmark in an older build: each round runs it once
# (-count 1) in the old build, then once here. It prints, per request, the median (min-max)
# ratio to the floor of the same run, for this build, and benchstat of old against new.
#
# Usage: hack/bench-request.sh [ROUNDS] [OLD_COMMIT]   (defaults: 5 rounds, 41e4adb)
#
# The old build is a detached worktree in ${BENCH_OLD_TREE:-/tmp/synchook-$OLD}; the benchmark
# file is copied into it (it compiles against builds from 41e4adb on). Results go to
# ${BENCH_OUT:-/tmp/synchook-bench-request}: old.txt, new.txt, benchstat.txt. About 25 s a round.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
old=${2:-41e4adb}
tree=${BENCH_OLD_TREE:-/tmp/synchook-$old}
out=${BENCH_OUT:-/tmp/synchook-bench-request}
export GOFLAGS=${GOFLAGS:--buildvcs=false}
mkdir -p "$out"

if [ ! -d "$tree" ]; then
  git worktree add --detach "$tree" "$old"
fi
cp internal/bridge/request_bench_test.go "$tree/internal/bridge/"
(cd "$tree" && go test -c -o "$out/old.test" ./internal/bridge)
go test -c -o "$out/new.test" ./internal/bridge

run() { # run NAME: one -count 1 run of NAME.test, appended to NAME.txt
  "$out/$1.test" -test.run '^$' -test.bench BenchmarkRequest -test.benchtime "${BENCHTIME:-2000x}" -test.count 1 -test.benchmem 2>/dev/null |
    grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$out/$1.txt"
}
rm -f "$out/old.txt" "$out/new.txt"
for i in $(seq 1 "$rounds"); do
  echo "round $i of $rounds" >&2
  run old
  run new
done

# ratio to the floor, per round, for this build (POSIX awk: no asort)
awk '
  function sortv(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
  /^BenchmarkRequest\// {
    name = $1; sub(/^BenchmarkRequest\//, "", name); sub(/-[0-9]+$/, "", name)
    if (name == "floor") { round++; floor[round] = $3; floorAllocs[round] = $7 }
    ns[name, round] = $3; allocs[name, round] = $7; names[name] = 1
  }
  END {
    for (n in names) {
      m = 0
      for (r = 1; r <= round; r++) { m++; v[m] = ns[n, r] / floor[r]; a[m] = allocs[n, r] / floorAllocs[r] }
      sortv(v, m); sortv(a, m)
      printf "%-14s ratio to the floor %.2f (%.2f-%.2f)   allocs %.2fx\n", n, v[int((m+1)/2)], v[1], v[m], a[int((m+1)/2)]
    }
  }' "$out/new.txt" | sort
go run golang.org/x/perf/cmd/benchstat@latest "$out/old.txt" "$out/new.txt" | tee "$out/benchstat.txt"
