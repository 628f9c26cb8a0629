# syntax=docker/dockerfile:1
# The synchook image. One binary, at /plugin/plugin, serves every way vcluster runs it:
#   - vcluster plugin v2 (plugin.yaml): the chart's init container runs
#     `/plugin/plugin install /plugins/synchook` (this image has no sh for the chart's default
#     `cp -r /plugin /plugins/<name>`), and the syncer starts the copy itself;
#   - legacy plugin v1 sidecar (plugin-v1.yaml) and the admission endpoint: `serve` (the default).
# Build a binary with your own Go hooks: --build-arg HOOKS=./examples/pod-hook (a main package).
FROM golang:1.26 AS build
ARG HOOKS=.
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd "$HOOKS" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/synchook/synchook/plugin.version=$VERSION" -o /out/plugin .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/plugin /plugin/plugin
USER 65532:65532
ENTRYPOINT ["/plugin/plugin"]
CMD ["serve"]
