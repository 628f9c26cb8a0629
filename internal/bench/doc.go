// Package bench is synchook's load command (`synchook bench`): on loopback only, bounded in
// count and time, it starts the sidecar as a child process and reports throughput and
// p50/p99/p999 latency at concurrency 1, 16 and 64 for
//
//   - the admission transport: AdmissionReviews over HTTPS (HTTP/1.1 keep-alive) and over the
//     unix socket;
//   - the vcluster plugin v1 gRPC bridge, driven the way vcluster drives it: a new connection
//     per call, whole objects;
//
// plus the sidecar's CPU seconds per 1,000 mutations and its RSS (idle, and peak), read from
// /proc. In the same run it measures the floors each figure is compared with:
//
//	(a) typed JSON decode + encode of the same object with the same libraries (in process)
//	(b) one HTTPS round trip of the same bytes on a kept connection to a handler that does nothing
//	(c) the same through gRPC with a new connection per call
//
// and prints every figure in absolute terms (over the whole run) and as a ratio to its floor,
// computed per interleaved round and given as the median and range over the rounds.
//
// Deadline (`synchook-bench deadline`) checks the bounds of one request rather than speed: the
// slowest request of engine's BenchmarkCostAgainstSize sent several at once to a sidecar with
// --request-timeout and --max-concurrent-hooks; it fails when more requests ran than there are
// slots or an answer came later than the timeout plus a grace.
package bench
