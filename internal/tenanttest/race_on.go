//go:build race

package tenanttest

// raceFactor scales CallTimeout under the race detector.
const raceFactor = 10
