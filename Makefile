# synchook — run `make help` for the targets.
SHELL := /usr/bin/env bash
GOFLAGS ?= -buildvcs=false
export GOFLAGS

.PHONY: help run build test lint fmt vet generate envtest-assets docker

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# make run builds RUN_BIN and then execs it: the recipe's shell becomes synchook, so make is its
# parent, and GNU make passes the SIGTERM it gets on to it and waits for it to exit. So
# `make run &` ... `kill $!` stops synchook and frees its ports (with `go run` it did not:
# go run died and left the program it had started holding them). Ports, serve's defaults:
#   127.0.0.1:9443  HTTPS admission endpoint, loopback only (the syncer is in the same pod)
#   :9440           plain-HTTP /healthz and /readyz, all interfaces (kubelet probes reach the pod IP)
#   :9441           plain-HTTP Prometheus /metrics, all interfaces (Prometheus scrapes the pod IP)
# SERVE_FLAGS adds serve's flags, e.g.
#   make run SERVE_FLAGS='--health-probe-bind-address 127.0.0.1:9440 --metrics-bind-address 127.0.0.1:9441'
RUN_BIN ?= bin/synchook
SERVE_FLAGS ?=

run: ## build bin/synchook and run it on the built-in default config: HTTPS on 127.0.0.1:9443, health :9440 and metrics :9441 on all interfaces; stop it with SIGTERM to make (kill $!)
	go build -o $(RUN_BIN) .
	exec $(RUN_BIN) serve $(SERVE_FLAGS)

build: ## build the static binary ./synchook
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o synchook .

test: ## install what the tests need and run every check and test (hack/test.sh)
	hack/test.sh

lint: ## golangci-lint only (installed by hack/test.sh into ./bin)
	bin/golangci-lint run ./...

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

vet: ## go vet
	go vet ./...

generate: ## regenerate internal/bridge/remote's Go code from remote.proto (protoc from apt, plugins pinned into ./bin)
	hack/generate.sh

envtest-assets: ## build (or find cached) kube-apiserver and etcd, print KUBEBUILDER_ASSETS
	hack/envtest-assets.sh

docker: ## build the container image synchook:dev (needs a Docker engine)
	docker build -t synchook:dev .
