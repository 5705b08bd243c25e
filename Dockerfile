# syntax=docker/dockerfile:1
# roomcast gateway: a static binary on distroless, running as a non-root user.
#   docker build -t roomcast/gateway .
#   docker run --rm -p 8080:8080 roomcast/gateway
# The admin listener (9090) is left unpublished; add -p 127.0.0.1:9090:9090 to reach it.

# The module needs Go 1.26 (go.mod); the build stage runs on the builder's own
# platform and cross-compiles for the target one.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/gateway ./cmd/gateway

# distroless/static: CA certificates, tzdata and /etc/passwd, no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /gateway
# Listen on every interface inside the container (the binary's defaults are loopback).
ENV ROOMCAST_ADDR=0.0.0.0:8080 ROOMCAST_ADMIN_ADDR=0.0.0.0:9090
# Only the public port: `docker run -P` publishes every EXPOSEd port, and the admin
# listener has no authentication.
EXPOSE 8080
# Numeric, so that Kubernetes' runAsNonRoot can verify it (65532 is distroless's
# "nonroot"; deploy/deployment.yaml runs as the same user).
USER 65532:65532
ENTRYPOINT ["/gateway"]
