"""Attribute names the agent puts on the wire, in one place.

OpenTelemetry semantic-convention names where one exists (hardware, k8s, container, process);
an `nvidia.*` namespace for what the conventions lack. Receivers set them, processors match on
them, exporters map them (the Prometheus exporter's `dcgm` naming renames them).
"""

# The semantic-conventions release these names follow (receivers put it on what they emit;
# checked against otelgpu/receivers/nvml/semconv_facts.yaml).
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"

# Resource attributes of a GPU (or MIG instance).
HW_ID = "hw.id"  # GPU or MIG UUID
HW_TYPE = "hw.type"  # always "gpu"
HW_NAME = "hw.name"  # "nvidia0" style device name
HW_MODEL = "hw.model"  # "NVIDIA H100 80GB HBM3"
HW_VENDOR = "hw.vendor"  # "NVIDIA"
HW_PARENT = "hw.parent"  # the parent GPU's UUID, on MIG instances
GPU_INDEX = "nvidia.gpu.index"  # NVML index, as a string ("0")
GPU_PCI_BUS_ID = "nvidia.gpu.pci_bus_id"
HW_DRIVER_VERSION = "hw.driver_version"  # the NVIDIA driver's version ("550.54.15")
HW_SERIAL_NUMBER = "hw.serial_number"  # the board serial, where NVML reports one
HW_FIRMWARE_VERSION = "hw.firmware_version"  # the VBIOS version
MIG_PROFILE = "nvidia.mig.profile"  # "1g.10gb"
MIG_GPU_INSTANCE_ID = "nvidia.mig.gpu_instance_id"
MIG_COMPUTE_INSTANCE_ID = "nvidia.mig.compute_instance_id"
GPU_MINOR = "nvidia.gpu.minor"  # /dev/nvidia<minor>, as a string; DRA names GPUs by it
MIG_PLACEMENT_START = "nvidia.mig.placement_start"  # the GPU instance's first memory slice
HOST_NAME = "host.name"  # the node name (K8S_NODE_NAME) in Kubernetes, else the hostname
SIMULATED = "otelgpu.simulated"  # true on every resource of the simulated backend

# The agent as an OpenTelemetry service: on every resource the OTLP exporters send (Prometheus'
# OTLP endpoint makes `job` of service.name and `instance` of service.instance.id).
SERVICE_NAME = "service.name"  # "otelgpu"
SERVICE_INSTANCE_ID = "service.instance.id"  # a UUID v5 of the node name: stable per node
SERVICE_VERSION = "service.version"  # otelgpu.__version__

# Who holds the GPU (k8s_attributes) and which process uses it (nvml processes: true).
K8S_NODE_NAME = "k8s.node.name"
K8S_NAMESPACE_NAME = "k8s.namespace.name"
K8S_POD_NAME = "k8s.pod.name"
K8S_POD_UID = "k8s.pod.uid"
K8S_CONTAINER_NAME = "k8s.container.name"
GPU_SHARED = "nvidia.gpu.shared"  # true when several containers hold the same GPU
GPU_HOLDERS = "nvidia.gpu.holders"  # how many containers hold it
GPU_ALLOCATION_SOURCE = "nvidia.gpu.allocation.source"  # device_plugin | dra
GPU_REPLICA = "nvidia.gpu.replica"  # the device plugin's replica ID(s) of a holder ("0,3")
# The DRA ResourceClaim(s) a holder got the device through (allocation series only). The
# conventions define no ResourceClaim attributes; these keep their k8s.<kind> spelling.
GPU_RESOURCECLAIM_NAME = "nvidia.gpu.resourceclaim.name"  # "train-gpu" ("a,b" for two)
GPU_RESOURCECLAIM_NAMESPACE = "nvidia.gpu.resourceclaim.namespace"
CONTAINER_ID = "container.id"
PROCESS_PID = "process.pid"
SLURM_JOB_ID = "slurm.job.id"  # from the process's Slurm cgroup (nvml processes: true)
SLURM_JOB_SLUID = "slurm.job.sluid"  # Slurm 26.05+ cgroup v2 paths carry this instead
SLURM_STEP_ID = "slurm.step.id"  # "0", "batch", "extern", "interactive"

# Runtime business labels (container_env); the key follows the prefix verbatim.
CONTAINER_ENV_PREFIX = "container.env."
CONTAINER_LABEL_PREFIX = "container.label."
POD_LABEL_PREFIX = "k8s.pod.label."
POD_ANNOTATION_PREFIX = "k8s.pod.annotation."

# Metrics produced by processors rather than receivers.
GPU_ALLOCATION = (
    "nvidia.gpu.allocation"  # a holder's share of a GPU / MIG instance (k8s_attributes)
)
