// Package e2e holds end-to-end tests that run synchook against a real kube-apiserver and etcd
// (envtest, binaries built by hack/envtest-assets.sh from the Go module proxy).
package e2e
