# otelgpu agent image: the package in a virtualenv on a pinned slim Python, non-root by default.
#   docker build -t otelgpu:$(python3 -c 'import otelgpu; print(otelgpu.__version__)') .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/otelgpu:VERSION --push .
# Each release tag builds it that way (.github/workflows/release.yml, with --build-arg VERSION)
# and pushes ghcr.io/otelgpu/otelgpu:VERSION.
#
# BASE_IMAGE may name any Debian-like image with python3 (3.11+) and `python3 -m venv`:
# the tests build on a local debootstrap image (tests/deploy/base_image.py) because no
# registry is reachable there. Every dependency ships wheels for amd64 and arm64, so the
# multi-arch build needs no compiler (docs/deploy.md, "Building the image").
#
# NVML is not in the image: the NVIDIA container runtime mounts the node driver's
# libnvidia-ml.so into the container (NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES are
# set here and in the DaemonSet). The DaemonSet runs it as uid 0 with every capability dropped,
# because the kubelet's pod-resources socket and containerd's socket only admit root (see
# docs/deploy.md, "Running as non-root").

ARG BASE_IMAGE=python:3.11.11-slim-bookworm

# Build stage: install the package and its dependencies (all wheels; no compiler needed).
FROM ${BASE_IMAGE} AS build
# Where pip looks: PyPI unless these say otherwise (a mirror, or a wheelhouse: the tests
# serve one on loopback). Build-stage only: nothing of them reaches the final image.
ARG PIP_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python3 -m venv /opt/otelgpu
COPY pyproject.toml README.md ./
COPY otelgpu ./otelgpu
# Byte-compiled at install time: the root filesystem is read-only at run time.
RUN /opt/otelgpu/bin/pip install --no-cache-dir .

# Runtime stage: the virtualenv and the DaemonSet's pipeline, nothing else.
FROM ${BASE_IMAGE}
ARG VERSION=0.2.0
LABEL org.opencontainers.image.title="otelgpu" \
      org.opencontainers.image.description="OpenTelemetry-Collector-style GPU metrics agent for Kubernetes nodes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /opt/otelgpu /opt/otelgpu
COPY pipelines/k8s-daemonset.yaml /etc/otelgpu/pipeline.yaml
ENV PATH=/opt/otelgpu/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
# Allocator settings (bench/p3_rss.py runs the agent with them; the DaemonSet repeats them):
# glibc gives each thread that allocates its own arena (up to 8 per core), and the agent's
# worker threads (NVML, parsing, rendering) would each keep one mostly empty: two are enough. A
# fixed mmap threshold returns big buffers (/metrics bodies, OTLP requests) to the system
# when freed instead of leaving them in the heap (glibc raises the threshold on its own).
ENV MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072
# gRPC resolves names with the C library's getaddrinfo instead of its bundled c-ares: the
# agent dials a socket path or one OTLP host, and c-ares' code and state cost 0.4 MiB of RSS
# (bench/p3_rss.py, docs/dev/memory.md; the DaemonSet repeats it).
ENV GRPC_DNS_RESOLVER=native
# A numeric uid (distroless' "nonroot"), so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
EXPOSE 9400 8888 13133
ENTRYPOINT ["otelgpu"]
CMD ["run", "-c", "/etc/otelgpu/pipeline.yaml"]
