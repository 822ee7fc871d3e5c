# syntax=docker/dockerfile:1
# Multi-stage build: compile with the Swift toolchain, ship a small Ubuntu image holding only
# the statically linked `baton` binary, libpq, and the flows and migrations it reads.

FROM swift:6.3-noble AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpq-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Resolve dependencies in their own layer so source edits do not refetch them.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product baton --static-swift-stdlib \
 && mkdir -p /staging \
 && cp "$(swift build -c release --show-bin-path)/baton" /staging/baton

FROM ubuntu:24.04
ARG BATON_COMMIT=unknown
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpq5 ca-certificates curl tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /app --shell /usr/sbin/nologin baton
WORKDIR /app
COPY --from=build /staging/baton /usr/local/bin/baton
COPY Flows ./Flows
COPY Migrations ./Migrations
# Baton Studio's page and reference web renderer (served only when BATON_STUDIO says so).
COPY Studio ./Studio
USER baton
ENV HTTP_HOST=0.0.0.0 \
    HTTP_PORT=8080 \
    LOG_FORMAT=json \
    BATON_COMMIT=${BATON_COMMIT}
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s CMD curl -fsS http://127.0.0.1:8080/readyz >/dev/null || exit 1
# `serve` applies pending migrations first (under an advisory lock, so replicas starting
# together are safe); set BATON_MIGRATE=false to run `baton migrate` as a separate step.
ENTRYPOINT ["baton"]
CMD ["serve"]
