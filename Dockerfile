# otelgpu agent image: the package in a virtualenv on a pinned slim Python, non-root by default.
#   docker build -t otelgpu:0.1.0 .
#
# NVML is not in the image: the NVIDIA container runtime mounts the node driver's
# libnvidia-ml.so into the container (NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES are
# set here and in the DaemonSet). The DaemonSet runs it as uid 0 with every capability dropped,
# because the kubelet's pod-resources socket and containerd's socket only admit root (see
# docs/deploy.md, "Running as non-root").

# Build stage: install the package and its dependencies (all wheels; no compiler needed).
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/otelgpu
COPY pyproject.toml README.md ./
COPY otelgpu ./otelgpu
# Byte-compiled at install time: the root filesystem is read-only at run time.
RUN /opt/otelgpu/bin/pip install --no-cache-dir .

# Runtime stage: the virtualenv and the DaemonSet's pipeline, nothing else.
FROM python:3.11.11-slim-bookworm
LABEL org.opencontainers.image.title="otelgpu" \
      org.opencontainers.image.description="OpenTelemetry-Collector-style GPU metrics agent for Kubernetes nodes" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/otelgpu /opt/otelgpu
COPY pipelines/k8s-daemonset.yaml /etc/otelgpu/pipeline.yaml
ENV PATH=/opt/otelgpu/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
# A numeric uid (distroless' "nonroot"), so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
EXPOSE 9400 13133
ENTRYPOINT ["otelgpu"]
CMD ["run", "-c", "/etc/otelgpu/pipeline.yaml"]
