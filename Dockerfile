# feishu-bridge container image.
#
#   docker build -t feishu-bridge .
#
# The image listens on 0.0.0.0:8080. On a non-loopback address the service refuses to
# start unless an admin token protects the REST routes, and no token is baked in here:
# pass one at run time. /metrics needs no token (unless server.protect_metrics = true),
# so publish the port on loopback and let a reverse proxy forward /webhook/* only.
#
#   docker run --rm -p 127.0.0.1:8080:8080 -v feishu-bridge-data:/data \
#     -e FEISHU_BRIDGE_ADMIN_TOKEN=change-me feishu-bridge
#
# The built-in config (/etc/feishu-bridge/feishu-bridge.toml) only sets the listen
# address and a SQLite file under /data. For real use, mount your own config over it
# (or elsewhere and pass `--config`), and give secrets through the environment:
#
#   docker run --rm -p 127.0.0.1:8080:8080 -v feishu-bridge-data:/data \
#     -v "$PWD/feishu-bridge.toml:/etc/feishu-bridge/feishu-bridge.toml:ro" \
#     -e FEISHU_BRIDGE_ADMIN_TOKEN=... -e FEISHU_BRIDGE_PLANNER_VERIFICATION_TOKEN=... \
#     feishu-bridge
#
# `--config` is a global flag, so the ENTRYPOINT can carry it and any subcommand can
# follow: `docker run ... feishu-bridge check-config`, `... migrate`, `... openapi`.
#
# The service drains in-flight work on SIGTERM for up to server.shutdown_grace_secs
# (20 s by default); give `docker stop` more than that, e.g. `docker stop -t 30`.
#
# Linted by .ci/deploy-check (hadolint).

ARG RUST_IMAGE=rust:1.89-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- chef: the toolchain plus cargo-chef -------------------------------------------
FROM ${RUST_IMAGE} AS chef
ARG CARGO_CHEF_VERSION=0.1.78
# Smaller binary; set here so the dependency cache and the final build agree.
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
RUN cargo install cargo-chef --locked --version "${CARGO_CHEF_VERSION}"
WORKDIR /src

# ---- planner: reduce the workspace to a dependency recipe --------------------------
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

# ---- cacher: build only the dependencies (cached until Cargo.toml/lock change) ------
FROM chef AS cacher
COPY --from=planner /src/recipe.json recipe.json
# The build options of the bundled SQLite (an [env] setting) apply to the dependencies.
COPY .cargo/config.toml .cargo/config.toml
RUN cargo chef cook --release --locked --recipe-path recipe.json

# ---- builder: build the service on top of the cached dependencies ------------------
FROM cacher AS builder
COPY . .
RUN cargo build --release --locked --bin feishu-bridge \
 && install -D -m 0755 target/release/feishu-bridge /out/feishu-bridge

# ---- runtime -------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

LABEL org.opencontainers.image.title="feishu-bridge" \
      org.opencontainers.image.description="Feishu (Lark) event URL for AI-agent bots: verified ingress, durable inbox, deterministic thread context" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://example.com/feishu-bridge"

# TLS to the Feishu Open API goes through rustls; ca-certificates is all that is needed.
# Not pinned (DL3008): RUNTIME_IMAGE fixes the Debian release, whose archive keeps only
# the current ca-certificates, so a pinned version would break the build at its next
# update, and the trust store should be the newest one anyway.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 feishu-bridge \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin feishu-bridge \
 && mkdir -p /data /etc/feishu-bridge \
 && chown 10001:10001 /data \
 && chmod 0750 /data \
 && printf '%s\n' \
      '[server]' \
      'listen = "0.0.0.0:8080"' \
      '[database]' \
      'url = "sqlite:///data/feishu-bridge.db"' \
      > /etc/feishu-bridge/feishu-bridge.toml \
 && chmod 0644 /etc/feishu-bridge/feishu-bridge.toml

COPY --from=builder /out/feishu-bridge /usr/local/bin/feishu-bridge

USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8080

HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/feishu-bridge", "healthcheck", "http://127.0.0.1:8080/healthz"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/feishu-bridge", "--config", "/etc/feishu-bridge/feishu-bridge.toml"]
CMD ["serve"]
