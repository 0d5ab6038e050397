# syntax=docker/dockerfile:1
#
# mcpgate container image.
#
#   docker build -t mcpgate .                      # the gateway (default target)
#   docker build --target e2bsim -t mcpgate-e2bsim . # the E2B simulator, for demos
#   docker build --build-arg VERSION=v1.2.3 -t mcpgate:v1.2.3 .
#
# The build stage compiles exactly what `make build` compiles: the same
# package (./cmd/mcpgate) with the same flags (deploy/deploy_test.go checks
# it). The final image is distroless static, runs as the nonroot user
# (65532), holds two static binaries and CA certificates, and no secrets:
# ENCRYPTION_KEY, JWT_SECRET and DATABASE_URL come from the environment (or
# NAME_FILE mounts) at run time.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcpgate ./cmd/mcpgate && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/healthcheck ./deploy/healthcheck && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/e2bsim ./cmd/e2bsim

# The E2B simulator for the compose file's demo profile. Never point a
# production gateway at it.
FROM gcr.io/distroless/static-debian12:nonroot AS e2bsim
COPY --from=build /out/e2bsim /usr/local/bin/e2bsim
USER nonroot:nonroot
EXPOSE 3001
ENTRYPOINT ["/usr/local/bin/e2bsim"]
CMD ["--listen", "0.0.0.0:3001", "--max-running", "100"]

# The gateway: the default (last) target.
FROM gcr.io/distroless/static-debian12:nonroot AS mcpgate
COPY --from=build /out/mcpgate /usr/local/bin/mcpgate
COPY --from=build /out/healthcheck /usr/local/bin/healthcheck
# DATA_DIR is used only with the embedded database, which this image does not
# run: give it DATABASE_URL.
ENV LISTEN_ADDR=:8080 DATA_DIR=/home/nonroot/data LOG_FORMAT=json
USER nonroot:nonroot
EXPOSE 8080
# distroless has no shell or curl: a 2 MB static probe (deploy/healthcheck)
# asks /healthz on LISTEN_ADDR's port.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/healthcheck"]
ENTRYPOINT ["/usr/local/bin/mcpgate"]
CMD ["serve"]
