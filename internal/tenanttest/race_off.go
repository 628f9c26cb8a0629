//go:build !race

package tenanttest

// raceFactor scales RequestTimeout and CallTimeout under the race detector; without it the
// cases hold the 1 s deadline docs/guarantees.md states.
const raceFactor = 1
