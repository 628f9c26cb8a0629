# synchook — run `make help` for the targets.
SHELL := /usr/bin/env bash
GOFLAGS ?= -buildvcs=false
export GOFLAGS

.PHONY: help run build test lint fmt vet generate envtest-assets docker

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

run: ## run the sidecar with the built-in default config on 127.0.0.1:9443
	go run . serve

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
