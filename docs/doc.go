// Package docs holds synchook's documentation beyond the README, one Markdown file per topic
// (config.md, guarantees.md, capture-replay.md, performance.md, …), and the test that keeps
// every Markdown file of the repository honest: each relative link must name a file or
// directory that exists, and each #anchor into a Markdown file a heading it has. The package
// has no code; go test ./... runs the check.
package docs
