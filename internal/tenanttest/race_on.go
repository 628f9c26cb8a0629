//go:build race

package tenanttest

// raceFactor scales RequestTimeout and CallTimeout under the race detector: 30, so that the
// 1 MB cases (1–2 s per request with -race on an idle 2-core machine, several times that on
// a loaded one) stay well within it. The 1 s guarantee itself is held by the build without
// the detector.
const raceFactor = 30
