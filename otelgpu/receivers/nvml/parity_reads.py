"""Dedicated NVML calls whose readings carry point attributes (one series per clock event
reason, per NVLink link, per PCIe limit), for the rows in `fields_parity.py`.

A `PointReader` answers a list of (metric, attributes, value). Like a `CallReader`, a reader
NVML refuses (NOT_SUPPORTED, FUNCTION_NOT_FOUND) is remembered per device by the collector and
never asked again. The NVLink readers also remember, per device, the links that do not exist
(as `nvlink:<n>` in `Device.unsupported`), so a GPU with 12 links is asked about 12 links, and
one without NVLink refuses the whole reader after the first cycle. MIG instances are not
asked: these readings belong to the whole GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from otelgpu.pdata.model import Attributes
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.fields_parity import (
    CLOCK_EVENT_BITS,
    CLOCK_EVENT_REASON,
    ERROR_TYPE,
    NVLINK_COUNTERS,
    NVLINK_LINK,
    NVLINK_MAX_LINKS,
    PCIE_LINK_LIMIT,
)
from otelgpu.receivers.nvml.nvml import NvmlClient, NvmlError

Point = tuple[str, Attributes, int | float]

# Codes NVML answers for a link number the GPU does not have.
_NO_LINK = frozenset({*nvml.UNSUPPORTED_CODES, 2, nvml.ERROR_NOT_FOUND})  # 2: INVALID_ARGUMENT

NO_ATTRIBUTES: Attributes = {}
_REASONS: tuple[tuple[int, Attributes], ...] = tuple(
    (bit, {CLOCK_EVENT_REASON: name}) for bit, name in CLOCK_EVENT_BITS
)
_LINKS: tuple[Attributes, ...] = tuple({NVLINK_LINK: n} for n in range(NVLINK_MAX_LINKS))
_LINK_ERRORS: tuple[tuple[tuple[int, Attributes], ...], ...] = tuple(
    tuple((counter, {NVLINK_LINK: n, ERROR_TYPE: kind}) for counter, kind in NVLINK_COUNTERS)
    for n in range(NVLINK_MAX_LINKS)
)
_CURRENT: Attributes = {PCIE_LINK_LIMIT: "current"}
_MAX: Attributes = {PCIE_LINK_LIMIT: "max"}


@dataclass(frozen=True, slots=True)
class PointReader:
    """A dedicated NVML call whose points carry attributes; `metrics` are the ones it feeds."""

    key: str
    metrics: tuple[str, ...]
    read: Callable[[NvmlClient, Device], list[Point]]
    # A fact of the board (its temperature limits): the first answer is kept in
    # `Device.static` and served again while the device is open, without asking NVML.
    static: bool = False


def _clock_events(client: NvmlClient, device: Device) -> list[Point]:
    mask = client.clock_event_reasons(device.handle)
    points: list[Point] = [
        ("nvidia.gpu.clock.event.active", attributes, 1 if mask & bit else 0)
        for bit, attributes in _REASONS
    ]
    points.append(("nvidia.gpu.clock.event.reasons", NO_ATTRIBUTES, mask))
    return points


def _links(client: NvmlClient, device: Device) -> list[tuple[int, bool]]:
    """(link, active) for each link the GPU has; raises NOT_SUPPORTED when it has none."""
    found = []
    for link in range(NVLINK_MAX_LINKS):
        if f"nvlink:{link}" in device.unsupported:
            continue
        try:
            found.append((link, client.nvlink_state(device.handle, link)))
        except NvmlError as exc:
            if exc.code not in _NO_LINK:
                raise
            device.unsupported.add(f"nvlink:{link}")
    if not found:
        raise NvmlError(nvml.ERROR_NOT_SUPPORTED, "no NVLink on this GPU")
    return found


def _nvlink_state(client: NvmlClient, device: Device) -> list[Point]:
    return [
        ("nvidia.gpu.nvlink.state", _LINKS[link], 1 if up else 0)
        for link, up in _links(client, device)
    ]


def _nvlink_errors(client: NvmlClient, device: Device) -> list[Point]:
    points: list[Point] = []
    for link, _ in _links(client, device):
        for counter, attributes in _LINK_ERRORS[link]:
            key = f"nvlink.counter:{link}:{counter}"
            if key in device.unsupported:
                continue
            try:
                count = client.nvlink_error_counter(device.handle, link, counter)
            except NvmlError as exc:
                if exc.code not in nvml.UNSUPPORTED_CODES:
                    raise
                device.unsupported.add(key)  # e.g. Blackwell drops the DL counters
                continue
            points.append(("nvidia.gpu.nvlink.link.errors", attributes, count))
    return points


def _pcie_link(client: NvmlClient, device: Device) -> list[Point]:
    gen, max_gen, width, max_width = client.pcie_link(device.handle)
    return [
        ("nvidia.gpu.pcie.link.generation", _CURRENT, gen),
        ("nvidia.gpu.pcie.link.generation", _MAX, max_gen),
        ("nvidia.gpu.pcie.link.width", _CURRENT, width),
        ("nvidia.gpu.pcie.link.width", _MAX, max_width),
    ]


def _vgpu_license(client: NvmlClient, device: Device) -> list[Point]:
    licensed = client.vgpu_licensed(device.handle)
    return [("nvidia.gpu.vgpu.license.status", NO_ATTRIBUTES, 1 if licensed else 0)]


POINT_READERS: tuple[PointReader, ...] = (
    PointReader(
        "nvmlDeviceGetCurrentClocksEventReasons",
        ("nvidia.gpu.clock.event.active", "nvidia.gpu.clock.event.reasons"),
        _clock_events,
    ),
    PointReader("nvmlDeviceGetNvLinkState", ("nvidia.gpu.nvlink.state",), _nvlink_state),
    PointReader(
        "nvmlDeviceGetNvLinkErrorCounter", ("nvidia.gpu.nvlink.link.errors",), _nvlink_errors
    ),
    PointReader(
        "nvmlDeviceGetCurrPcieLinkGeneration",
        ("nvidia.gpu.pcie.link.generation", "nvidia.gpu.pcie.link.width"),
        _pcie_link,
    ),
    PointReader(
        "nvmlDeviceGetGridLicensableFeatures", ("nvidia.gpu.vgpu.license.status",), _vgpu_license
    ),
)
