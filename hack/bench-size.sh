#!/usr/bin/env bash
# bench-size.sh runs internal/bench's BenchmarkSize (issue 55: every path's write and read on a
# Pod of n and 4n tolerations) in ROUNDS interleaved rounds — each round every path at n, then
# at 4n, once (-count 1) — and prints, per path and request, the CPU time per op (cpu-ns/op, the
# process's) at n and at 4n (medians over the rounds) and the ratio 4n/n: the median and range of
# each round's ratio. Linear is ~4; issue 55 asks ≤ 4.6. A path whose median ratio is above 4.6
# is marked "over".
#
# Usage: hack/bench-size.sh [ROUNDS]   (default 5; ~1.5 min a round on 2 quiet cores)
#
# SIZE_N sets n (default 8000; the CEL cost budget caps one path lower, see the benchmark),
# BENCH the benchmarks (default ^BenchmarkSize$; e.g. 'BenchmarkSize/(labels|typed)/' for two
# paths), BENCHTIME each measurement (default 1s; a 32,000-toleration policy write takes longer, and
# runs once). Results go to ${BENCH_OUT:-/tmp/synchook-bench-size}: size.txt (the benchmark
# lines), ratios.txt (the table).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
out=${BENCH_OUT:-/tmp/synchook-bench-size}
export GOFLAGS=${GOFLAGS:--buildvcs=false}
mkdir -p "$out"
go test -c -o "$out/size.test" ./internal/bench
rm -f "$out/size.txt"
for i in $(seq 1 "$rounds"); do
  echo "round $i of $rounds ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  (cd internal/bench && "$out/size.test" -test.run '^$' -test.bench "${BENCH:-^BenchmarkSize\$}" -test.benchtime "${BENCHTIME:-1s}" \
    -test.count 1 -test.benchmem -size.n "${SIZE_N:-8000}") | grep -E '^Benchmark|FAIL|size_test' >>"$out/size.txt"
done
if grep -qE 'FAIL|size_test' "$out/size.txt"; then
  grep -E 'FAIL|size_test' "$out/size.txt" >&2
  exit 1
fi

# Per round: ratio of cpu-ns/op at 4n to that at n, per path/request (POSIX awk: no asort).
awk '
  function sortv(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
  function median(a, k) { sortv(a, k); return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2 }
  /^BenchmarkSize\// {
    name = $1; sub(/^BenchmarkSize\//, "", name); sub(/-[0-9]+$/, "", name)
    n = name; sub(/.*\/n=/, "", n); key = name; sub(/\/n=[0-9]+$/, "", key)
    cpu = ""
    for (i = 2; i < NF; i++) if ($(i+1) == "cpu-ns/op") cpu = $i
    if (!(key in small)) { small[key] = n; order[++keys] = key }
    if (n == small[key]) { r = ++rs[key]; lo[key, r] = cpu } else { r = ++rl[key]; hi[key, r] = cpu; large[key] = n }
  }
  END {
    printf "%-36s %7s %12s %7s %12s  %s\n", "path/request", "n", "cpu/op", "4n", "cpu/op", "ratio 4n/n: median (min-max) of " rs[order[1]] " rounds"
    for (k = 1; k <= keys; k++) {
      key = order[k]; m = 0
      for (r = 1; r <= rl[key]; r++) { m++; v[m] = hi[key, r] / lo[key, r]; a[m] = lo[key, r]; b[m] = hi[key, r] }
      mv = median(v, m); sortv(v, m)
      printf "%-36s %7d %9.2f ms %7d %9.2f ms  %5.2f (%.2f-%.2f)%s\n", key, small[key], median(a, m) / 1e6, large[key], median(b, m) / 1e6, mv, v[1], v[m], (mv > 4.6 ? "  over" : "")
    }
  }' "$out/size.txt" | tee "$out/ratios.txt"
