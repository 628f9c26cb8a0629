package plugin

import "runtime/debug"

// DefaultGCPercent is the garbage collector's target (GOGC) of synchook as a vcluster plugin v2
// when its environment sets no GOGC: the heap may grow to 5× what is live before a collection,
// instead of Go's 2×. (serve keeps Go's default: there the same setting bought nothing
// measurable; BENCHMARKS.md, "Tried and dropped".)
//
// synchook's live heap is small (the registry and a few caches: a few MiB), while every call
// allocates about the size of its object several times over (the request, the answer, gRPC's
// buffers), so with Go's default the collector runs every few hundred calls and took 10-12 % of
// the plugin's CPU under vcluster's manager. At 400 the plugin's CPU per call fell by ~11 % at
// 16 callers and its peak resident memory grew by 12-19 MiB, to 71-74 MiB (the vcluster-sdk
// style plugin's: 61-70 MiB); BENCHMARKS.md (issue 27) has the figures. Set GOGC (or GOMEMLIMIT, which bounds the heap
// whatever the percent) in the syncer container's environment to choose otherwise.
const DefaultGCPercent = 400

// setGCPercent sets DefaultGCPercent unless the environment sets GOGC, which the Go runtime
// has applied already.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
