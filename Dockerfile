# syntax=docker/dockerfile:1
#
# Rampart's container image: the `rampart` binary, run as `rampart serve` by default.
#
#   docker build -t rampart:0.1.0 .
#   docker run --rm -p 8080:8080 -v "$PWD/rampart.toml:/etc/rampart/rampart.toml:ro" rampart:0.1.0
#
# The server configuration is mounted at /etc/rampart/rampart.toml (in a container it must
# listen on 0.0.0.0, which needs [[auth.keys]]); the transformer models that
# `rampart models setup` writes are mounted at /var/lib/rampart/data (RAMPART_DATA_DIR).
# docs/deploy.md has the details and says what was and was not checked.

# ---- builder: the toolchain the workspace asks for (Cargo.toml rust-version 1.95) on the
# same Debian release as the runtime image, so the binary's glibc matches.
FROM rust:1.95.0-bookworm AS builder
WORKDIR /src
# .dockerignore keeps target/, data/, .git, fuzz/ and the MiniLM overlays out of the context.
COPY . .
# Cache mounts (BuildKit) keep the crates.io downloads and the build between image builds;
# the binary is copied out of the cached target/ in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release -p rampart-cli --locked \
    && install -D -m 0755 target/release/rampart /out/rampart

# ---- runtime: the binary needs glibc, libgcc_s and libm (ldd) and nothing else: the default
# pipeline is compiled in, TLS roots are compiled in (webpki-roots). bash, head and grep of the
# base image serve the HEALTHCHECK below (no curl in the image).
FROM debian:bookworm-slim AS runtime
ARG VERSION=0.1.0
ARG SOURCE_URL=https://example.invalid/rampart
LABEL org.opencontainers.image.title="rampart" \
      org.opencontainers.image.description="Rampart, a prompt firewall: rampart serve (check API, OpenAI-compatible proxy, audit log)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0"
# A numeric, non-root user; /var/lib/rampart holds the data directory (models, mounted) and
# the audit log (a volume in production).
RUN groupadd --system --gid 10001 rampart \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/rampart --no-create-home \
       --shell /usr/sbin/nologin rampart \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/rampart /var/lib/rampart/data /var/lib/rampart/audit \
    && install -d -m 0755 /etc/rampart
COPY --from=builder /out/rampart /usr/local/bin/rampart
# RAMPART_DATA_DIR: where `rampart models setup` output is mounted. The working directory is
# its parent, so the repository's pipeline configurations (model_dir = "data/models/...",
# relative to the working directory) find the models too. RAMPART_HEALTH_PORT: the port the
# HEALTHCHECK asks; set it when server.listen uses another port.
ENV RAMPART_DATA_DIR=/var/lib/rampart/data \
    RAMPART_HEALTH_PORT=8080 \
    RUST_LOG=info
WORKDIR /var/lib/rampart
USER 10001:10001
EXPOSE 8080
# Liveness over plain HTTP on loopback (/healthz needs no key). With [tls] configured it fails:
# rely on the orchestrator's probes instead (Kubernetes ignores HEALTHCHECK anyway).
HEALTHCHECK --interval=30s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${RAMPART_HEALTH_PORT} && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
# rampart is PID 1: SIGTERM stops it gracefully (in-flight requests drain, the audit log is
# flushed), SIGHUP reloads the configuration.
ENTRYPOINT ["/usr/local/bin/rampart"]
CMD ["serve", "--config", "/etc/rampart/rampart.toml"]
