package builtin

// StripThroughUnstructured is how the strip hook took paths off a typed object before it did
// so along the Go type: the oracle of FuzzStripTyped.
var StripThroughUnstructured = stripTyped

// ParseStripPath is parseStripPath, for the oracle's paths.
var ParseStripPath = parseStripPath
