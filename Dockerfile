# syntax=docker/dockerfile:1
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /gateway
# Listen on every interface inside the container; the admin port stays unpublished.
ENV ROOMCAST_ADDR=0.0.0.0:8080 ROOMCAST_ADMIN_ADDR=0.0.0.0:9090
EXPOSE 8080 9090
USER nonroot:nonroot
ENTRYPOINT ["/gateway"]
