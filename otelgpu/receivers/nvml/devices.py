"""The GPUs and MIG instances a receiver reads: found once, with their resource attributes.

Resource attribute dicts are built here once and reused by every cycle's ResourceMetrics
(they are never mutated), so a cycle allocates points, not attribute maps.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes, AttrValue
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import DcgmDevices
from otelgpu.receivers.nvml.nvml import Handle, MigInstance, NvmlClient, NvmlError

IDENTITY_CACHE = 1024  # point attribute dicts a device keeps with its identity added


@dataclass(eq=False)
class Device:
    """A GPU or a MIG instance, with what the receiver remembers about it between cycles."""

    handle: Handle
    index: int
    uuid: str
    resource: dict[str, AttrValue]
    parent: Device | None = None
    up: bool = True
    unsupported: set[str] = field(default_factory=set)  # reader keys NVML refused for good
    told_unsupported: set[str] = field(default_factory=set)  # those already logged
    field_ids: list[int] | None = None  # the field IDs still worth asking, once known
    # Static readings (`PointReader.static`) by reader key: read once while the device is open.
    static: dict[str, list[Any]] = field(default_factory=dict)
    gpu_instance_id: int = -1  # MIG instances: their GPU instance (GPM samples by it)
    has_mig: bool = False  # MIG enabled with instances: processes are read per instance
    dcgm_left_out: bool = False  # `naming: dcgm` does not serve it: `dcgm_device_set`
    gpm: bool = False
    gpm_samples: list[Any] = field(default_factory=list)  # [previous, current] buffers
    gpm_primed: bool = False
    process_resources: dict[int, dict[str, AttrValue]] = field(default_factory=dict)
    utilization_since_us: int = 0  # the newest per-process utilization sample already read
    # Point attributes with hw.id and hw.type added, per attribute dict of the catalog (by id;
    # the dict is kept in the entry so its id cannot be reused by another). Emptied when it
    # reaches IDENTITY_CACHE entries: attribute dicts are built once, so only a source that
    # builds them anew would fill it, and then memory stays bounded.
    _with_identity: dict[int, tuple[Attributes, Attributes]] = field(default_factory=dict)

    @property
    def is_mig(self) -> bool:
        """Whether this is a MIG instance (its GPU is `parent`)."""
        return self.parent is not None

    def point_attributes(self, attributes: Attributes) -> Attributes:
        """`attributes` with this device's `hw.id` and `hw.type` (built once per dict)."""
        hit = self._with_identity.get(id(attributes))
        if hit is not None and hit[0] is attributes:
            return hit[1]
        merged = {
            semconv.HW_ID: self.uuid,
            semconv.HW_TYPE: self.resource[semconv.HW_TYPE],
            **attributes,
        }
        if len(self._with_identity) >= IDENTITY_CACHE:
            self._with_identity.clear()
        self._with_identity[id(attributes)] = (attributes, merged)
        return merged


def _selected(index: int, uuid: str, devices: str | Sequence[int | str]) -> bool:
    return devices == "all" or index in devices or uuid in devices or str(index) in devices


def unmatched(devices: str | Sequence[int | str], found: list[Device]) -> list[int | str]:
    """The `devices:` entries that select none of the GPUs `found` (an index or a UUID that
    does not exist here, or a GPU that could not be opened)."""
    if devices == "all":
        return []
    gpus = [d for d in found if not d.is_mig]
    return [e for e in devices if not any(_selected(d.index, d.uuid, [e]) for d in gpus)]


def discover(
    client: NvmlClient,
    devices: str | Sequence[int | str],
    host_name: str,
    logger: logging.Logger,
) -> list[Device]:
    """Opens every selected GPU's handle (and its MIG instances') once."""
    driver = client.driver_version()
    found: list[Device] = []
    for index in range(client.device_count()):
        try:
            found.extend(_open_gpu(client, index, devices, driver, host_name))
        except NvmlError as exc:  # one broken GPU must not hide the others
            logger.warning("GPU %d could not be opened, leaving it out: %s", index, exc)
    gpus, migs = sum(not d.is_mig for d in found), sum(d.is_mig for d in found)
    logger.info(
        "found %s and %s (driver %s)",
        _count(gpus, "GPU", "GPUs"),
        _count(migs, "MIG instance", "MIG instances"),
        driver,
    )
    return found


def dcgm_device_set(devices: list[Device], choice: DcgmDevices) -> None:
    """Marks the devices `naming: dcgm` leaves out under `choice`, dcgm-exporter's `-d`: with
    `flex` (its default) a GPU that has MIG instances (they stand for it); with `gpus` every
    instance; with `instances` every GPU, MIG or not."""
    for device in devices:
        device.dcgm_left_out = {
            DcgmDevices.FLEX: device.has_mig,
            DcgmDevices.GPUS: device.is_mig,
            DcgmDevices.INSTANCES: not device.is_mig,
            DcgmDevices.ALL: False,
        }[choice]


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _open_gpu(
    client: NvmlClient,
    index: int,
    devices: str | Sequence[int | str],
    driver: str,
    host_name: str,
) -> list[Device]:
    handle = client.device_handle(index)
    uuid = client.uuid(handle)
    if not _selected(index, uuid, devices):
        return []
    gpu = Device(handle, index, uuid, _gpu_resource(client, handle, index, uuid, driver))
    gpu.resource[semconv.HOST_NAME] = host_name
    _set_optional(gpu.resource, semconv.GPU_MINOR, client.minor_number, handle)
    migs = [_mig(client, gpu, mig) for mig in client.mig_instances(handle)]
    gpu.has_mig = bool(migs)
    return [gpu, *migs]


def _gpu_resource(
    client: NvmlClient, handle: Handle, index: int, uuid: str, driver: str
) -> dict[str, AttrValue]:
    resource: dict[str, AttrValue] = {
        semconv.HW_ID: uuid,
        semconv.HW_TYPE: "gpu",
        semconv.HW_NAME: f"nvidia{index}",
        semconv.HW_MODEL: client.name(handle),
        semconv.HW_VENDOR: "NVIDIA",
        semconv.GPU_INDEX: str(index),
        semconv.GPU_PCI_BUS_ID: client.pci_bus_id(handle),
        semconv.HW_DRIVER_VERSION: driver,
    }
    for key, read in ((semconv.HW_SERIAL_NUMBER, client.serial),
                      (semconv.HW_FIRMWARE_VERSION, client.vbios_version)):  # fmt: skip
        value = _optional(read, handle)
        if value:
            resource[key] = value
    return resource


def _optional(read: Callable[[Handle], str], handle: Handle) -> str:
    """A descriptive string NVML may not have for this board ("" then)."""
    try:
        return read(handle).strip()
    except NvmlError as exc:
        if exc.code in nvml.UNSUPPORTED_CODES:
            return ""
        raise


def _set_optional(
    resource: dict[str, AttrValue], key: str, call: Callable[..., int], *args: Any
) -> None:
    """Sets `key` from an NVML call that only DRA attribution needs: left out (not fatal)
    when the driver or the agent's privileges do not allow it."""
    with contextlib.suppress(NvmlError):
        resource[key] = str(call(*args))


def _mig(client: NvmlClient, gpu: Device, mig: MigInstance) -> Device:
    resource = {
        **gpu.resource,
        semconv.HW_ID: mig.uuid,
        # GKE's device-name form for MIG ("nvidia0/gi1"), so device-name matching works.
        semconv.HW_NAME: f"{gpu.resource[semconv.HW_NAME]}/gi{mig.gpu_instance_id}",
        semconv.HW_PARENT: gpu.uuid,
        semconv.MIG_PROFILE: mig.profile,
        semconv.MIG_GPU_INSTANCE_ID: str(mig.gpu_instance_id),
        semconv.MIG_COMPUTE_INSTANCE_ID: str(mig.compute_instance_id),
    }
    # Inherits the parent's nvidia.gpu.minor; with the start slice it names the instance the
    # way DRA does.
    _set_optional(
        resource,
        semconv.MIG_PLACEMENT_START,
        client.placement_start,
        gpu.handle,
        mig.gpu_instance_id,
    )
    device = Device(mig.handle, gpu.index, mig.uuid, resource, parent=gpu)
    device.gpu_instance_id = mig.gpu_instance_id
    return device
