# syntax=docker/dockerfile:1
# Loom's one image. Every plane, the gateway and the assistant bridge run from it with different
# arguments to its entry point, `loom serve`:
#   loom serve --planes tasks                  (one plane: tasks, policy, decisions, help, insights)
#   loom serve --planes assistant              (the assistant bridge)
#   loom serve --gateway --planes identity     (the gateway, which serves identity too: the default)
# Admin commands run with another entry point: docker compose run --rm --entrypoint loom gateway admin bootstrap …
#
# Two stages. `build` has pip, the protobuf compiler (grpcio-tools, in a venv of its own) and a
# C toolchain for any package without a wheel. `runtime` has only the venv of Loom's runtime
# packages, Loom's source with the generated protobuf code, and the shipped docs (Markdown): no
# compiler, no pip cache, no tests. It runs as uid 10001 on a read-only root filesystem; it writes
# only to /var/lib/loom (LOOM_DATA_DIR, a volume) and /tmp (a tmpfs in Compose, an emptyDir in Helm).

ARG PYTHON_VERSION=3.11

# ---------------------------------------------------------------------------------------- build
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app

# Third-party packages first: this layer changes only with the lock. Test, lint and chart tools
# and the protobuf compiler stay out of the runtime venv.
COPY requirements.lock ./
RUN grep -v -E '^(pytest|pytest-[a-z-]+|execnet|ruff|mypy|uv|grpcio-tools|helm-python-sdk|kubernetes-validate|compose-spec)([=<>!~ ]|$)' requirements.lock > runtime.lock \
 && python -m venv /opt/loom \
 && /opt/loom/bin/pip install -r runtime.lock \
 && python -m venv /opt/protoc \
 && /opt/protoc/bin/pip install "$(grep -E '^grpcio-tools==' requirements.lock)"

# Generated protobuf and gRPC code, beside the .proto files as in a checkout.
COPY proto/ proto/
COPY scripts/gen_proto.py scripts/gen_proto.py
RUN /opt/protoc/bin/python scripts/gen_proto.py

# Loom's own packages, installed in place (as `./loom` does), so a path relative to the source
# tree (the docs the help plane indexes) is the same in the image as in a checkout.
COPY core/ core/
COPY models/ models/
COPY sdk/python/ sdk/python/
COPY services/ services/
COPY docs/ docs/
# The assistant's agent definition, which the assistant plane seeds into LibreChat.
COPY librechat/agent.yaml librechat/agent.yaml
RUN set -e; pkgs="-e proto -e core -e sdk/python"; \
    for pkg in models/*/ services/*/; do [ -f "$pkg/pyproject.toml" ] && pkgs="$pkgs -e $pkg"; done; \
    /opt/loom/bin/pip install --no-deps $pkgs \
 && /opt/loom/bin/loom config docs > /dev/null \
 && /opt/loom/bin/python -m compileall -q /app/proto /app/core /app/models /app/sdk /app/services /opt/loom/lib

# -------------------------------------------------------------------------------------- runtime
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 loom \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin loom \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/loom
COPY --from=build /opt/loom /opt/loom
COPY --from=build /app/proto /app/proto
COPY --from=build /app/core /app/core
COPY --from=build /app/models /app/models
COPY --from=build /app/sdk /app/sdk
COPY --from=build /app/services /app/services
COPY --from=build /app/docs /app/docs
COPY --from=build /app/librechat /app/librechat
ENV PATH=/opt/loom/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    LOOM_DATA_DIR=/var/lib/loom \
    LOOM_HTTP_HOST=0.0.0.0 \
    LOOM_HTTP_PORT=8080 \
    LOOM_GRPC_HOST=0.0.0.0 \
    LOOM_GRPC_PORT_BASE=7000
WORKDIR /app
USER 10001:10001
VOLUME ["/var/lib/loom"]
# 8080: the gateway's HTTP (REST, MCP, health, metrics). 7000: a plane's gRPC (and grpc.health.v1).
EXPOSE 8080 7000
ENTRYPOINT ["loom", "serve"]
CMD ["--gateway", "--planes", "identity"]
