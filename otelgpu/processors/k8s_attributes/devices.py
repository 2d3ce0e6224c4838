"""Device IDs as device plugins send them, and the resource attributes they match.

A device ID becomes a `Key`, a small tuple that a GPU or MIG resource of the nvml receiver
can produce from its own attributes:

- `GPU-8f6c...` (gpu-uuid) → ("id", uuid), matched on `hw.id`;
- `MIG-1c2d...` (mig-uuid) → ("id", uuid), matched on the MIG instance's `hw.id`;
- `MIG-GPU-8f6c.../1/0` (mig-legacy, drivers before R470) → ("mig", parent, gi, ci),
  matched on `hw.parent` + `nvidia.mig.gpu_instance_id` + `nvidia.mig.compute_instance_id`;
- `0` (index) → ("index", "0"), matched on `nvidia.gpu.index`;
- `nvidia0` (device-name, GKE) → ("name", "nvidia0"), matched on `hw.name`;
- `nvidia0/gi2` (gke-mig) → ("mig-name", "nvidia0", "2"), matched on the parent GPU's
  `hw.name` + `nvidia.mig.gpu_instance_id`.

DRA claim devices of NVIDIA's driver (`gpu.nvidia.com`) are named after the GPU's minor
number (`/dev/nvidia<minor>`), never its UUID or NVML index (see `parse_dra_device`):

- `gpu-1` → ("minor", "1"), matched on `nvidia.gpu.minor`;
- `gpu-1-mig-1g24gb-19-0` (driver 25.12+: profile, GI profile ID, placement start) and
  `gpu-1-mig-19-0-1` (25.3/25.8: GI profile ID, placement start, size) → ("mig-placement",
  "1", "0"), matched on the MIG instance's parent minor + `nvidia.mig.placement_start`
  (GPU instances of one GPU never overlap, so the start slice names one).

Any device-plugin ID may carry a sharing suffix, `::<n>` (NVIDIA time-slicing or MPS replicas, also
on MIG IDs on EKS) or `/vgpu<n>` (GKE time-sharing): the replica belongs to the same
device, and the allocation is marked as shared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes

Key = tuple[str, ...]

_REPLICA = re.compile(r"^(?P<base>.+?)(?:::(?P<n>\d+)|/vgpu(?P<v>\d+))$")
_MIG_LEGACY = re.compile(r"^MIG-(?P<parent>GPU-[^/]+)/(?P<gi>\d+)/(?P<ci>\d+)$")
_GKE_MIG = re.compile(r"^(?P<name>nvidia\d+)/gi(?P<gi>\d+)$")
_DEVICE_NAME = re.compile(r"^nvidia\d+$")

DRA_DRIVER = "gpu.nvidia.com"
_DRA_GPU = re.compile(r"^gpu-(?P<minor>\d+)$")
# Driver 25.3/25.8: all-numeric GI profile ID, placement start, placement size.
_DRA_MIG_OLD = re.compile(r"^gpu-(?P<minor>\d+)-mig-\d+-(?P<start>\d+)-\d+$")
# Driver 25.12+: a profile token (never all digits, e.g. "1g24gb"), GI profile ID, start.
_DRA_MIG = re.compile(
    r"^gpu-(?P<minor>\d+)-mig-(?=[a-z0-9.-]*[a-z])[a-z0-9.-]+-\d+-(?P<start>\d+)$"
)
# CDI names the driver hands the runtime: `k8s.gpu.nvidia.com/device=<name>` (before 25.12)
# and `k8s.gpu.nvidia.com/claim=<claim UID>-<name>`.
_CDI = re.compile(
    r"^k8s\.gpu\.nvidia\.com/(?:device=|claim=[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}"
    r"-[0-9a-f]{12}-)(?P<name>gpu-.+)$"
)

# Why a DRA claim device of NVIDIA's driver maps to no GPU (the counter's `reason`).
DRA_OTHER_POOL = "other_pool"  # its pool is not this node
DRA_VFIO = "vfio"  # a passthrough GPU bound to vfio-pci: NVML cannot see it
DRA_UNKNOWN_NAME = "unknown_name"  # a device name this agent cannot read


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """One parsed device ID: what it matches, the form it came in, whether it is a replica
    (and which: the number after `::` or `/vgpu`, dcgm-exporter's `vgpu` label)."""

    key: Key
    form: str
    replica: bool
    replica_id: str = ""


def parse_device_id(device_id: str, id_type: str = "auto") -> DeviceRef | None:
    """Parses one device ID; `id_type` is the config's `device_id_type`. None for ""."""
    device_id = device_id.strip()
    match = _REPLICA.match(device_id)
    base = match.group("base") if match else device_id
    if not base:
        return None
    key, form = _classify(base, id_type)
    replica_id = (match.group("n") or match.group("v")) if match else ""
    return DeviceRef(key, form, match is not None, replica_id or "")


def parse_dra_device(
    driver: str, device: str, cdi_devices: tuple[str, ...] = ()
) -> tuple[Key | None, str]:
    """A DRA claim device as (key, form) when it names an NVIDIA GPU or MIG instance;
    (None, reason) when it is NVIDIA's but names none; (None, "") for another driver's.

    Kubelets before 1.31 send no driver or device name, only CDI names: the device name is
    then read from them."""
    if not device and not driver:
        for cdi in cdi_devices:
            found = _CDI.match(cdi)
            if found:
                driver, device = DRA_DRIVER, found["name"]
                break
    if driver != DRA_DRIVER:
        return None, ""
    gpu = _DRA_GPU.match(device)
    if gpu:
        return ("minor", str(int(gpu["minor"]))), "dra-gpu"
    mig = _DRA_MIG_OLD.match(device) or _DRA_MIG.match(device)
    if mig:
        return ("mig-placement", str(int(mig["minor"])), str(int(mig["start"]))), "dra-mig"
    if device.startswith("gpu-vfio-"):
        return None, DRA_VFIO
    return None, DRA_UNKNOWN_NAME


def _classify(base: str, id_type: str) -> tuple[Key, str]:
    legacy = _MIG_LEGACY.match(base)
    if legacy and id_type in ("auto", "uuid"):
        return ("mig", legacy["parent"], legacy["gi"], legacy["ci"]), "mig-legacy"
    gke_mig = _GKE_MIG.match(base)
    if gke_mig and id_type in ("auto", "device-name"):
        return ("mig-name", gke_mig["name"], gke_mig["gi"]), "gke-mig"
    if id_type == "uuid":
        return ("id", base), _uuid_form(base)
    if id_type == "index":
        return ("index", base), "index"
    if id_type == "device-name":
        return ("name", base), "device-name"
    if base.isdigit():
        return ("index", base), "index"
    if _DEVICE_NAME.match(base):
        return ("name", base), "device-name"
    # GPU-/MIG- UUIDs, and anything else: a device plugin's own IDs are most likely
    # the identifiers NVML reports, so try them against hw.id.
    return ("id", base), _uuid_form(base)


def _uuid_form(base: str) -> str:
    if base.startswith("MIG-"):
        return "mig-uuid"
    if base.startswith("GPU-"):
        return "gpu-uuid"
    return "other"


def resource_keys(resource: Attributes, parent_names: dict[str, str]) -> list[Key]:
    """The keys a GPU or MIG resource answers to, most specific first.

    A MIG instance answers only to MIG keys (its own UUID, its parent + GI/CI, its parent's
    device name + GI), never to the parent's index or name, so a whole-GPU allocation is
    not mistaken for an instance. `parent_names` maps a GPU UUID to its `hw.name` (taken
    from the same batch) for the GKE MIG form.
    """
    keys: list[Key] = []
    hw_id = resource.get(semconv.HW_ID)
    if hw_id is not None:
        keys.append(("id", str(hw_id)))
    parent = resource.get(semconv.HW_PARENT)
    minor = resource.get(semconv.GPU_MINOR)
    if parent is not None:
        start = resource.get(semconv.MIG_PLACEMENT_START)
        if minor is not None and start is not None:  # the parent's minor, inherited
            keys.append(("mig-placement", str(minor), str(start)))
        gi = resource.get(semconv.MIG_GPU_INSTANCE_ID)
        ci = resource.get(semconv.MIG_COMPUTE_INSTANCE_ID)
        if gi is not None and ci is not None:
            keys.append(("mig", str(parent), str(gi), str(ci)))
        name = parent_names.get(str(parent), resource.get(semconv.HW_NAME))
        if gi is not None and name is not None:
            keys.append(("mig-name", str(name), str(gi)))
        return keys
    index = resource.get(semconv.GPU_INDEX)
    if index is not None:
        keys.append(("index", str(index)))
    name = device_file_name(resource)
    if name is not None:
        keys.append(("name", name))
    if minor is not None:
        keys.append(("minor", str(minor)))
    return keys


def device_file_name(resource: Attributes) -> str | None:
    """The name GKE's device plugin gives a GPU: its device file, `nvidia<minor>`.

    The minor number is not the NVML index (`hw.name` is `nvidia<index>`): on a node where
    they differ, matching `hw.name` would hand one GPU's pod to another. Without a minor
    (an older receiver, or NVML refused it) `hw.name` is the best guess.
    """
    minor = resource.get(semconv.GPU_MINOR)
    if minor is not None:
        return f"nvidia{minor}"
    name = resource.get(semconv.HW_NAME)
    return None if name is None else str(name)
