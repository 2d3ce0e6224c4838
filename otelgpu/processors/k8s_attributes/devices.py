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

Any of them may carry a sharing suffix, `::<n>` (NVIDIA time-slicing or MPS replicas, also
on MIG IDs on EKS) or `/vgpu<n>` (GKE time-sharing): the replica belongs to the same
device, and the allocation is marked as shared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otelgpu import semconv
from otelgpu.model import Attributes

Key = tuple[str, ...]

_REPLICA = re.compile(r"^(?P<base>.+?)(?:::(?P<n>\d+)|/vgpu(?P<v>\d+))$")
_MIG_LEGACY = re.compile(r"^MIG-(?P<parent>GPU-[^/]+)/(?P<gi>\d+)/(?P<ci>\d+)$")
_GKE_MIG = re.compile(r"^(?P<name>nvidia\d+)/gi(?P<gi>\d+)$")
_DEVICE_NAME = re.compile(r"^nvidia\d+$")


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
    if parent is not None:
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
    name = resource.get(semconv.HW_NAME)
    if name is not None:
        keys.append(("name", str(name)))
    return keys
