"""The GPU health summary: one answer to "does this GPU need attention?".

It is carried by `nvidia.gpu.up` (on by default: one series per GPU, `hw.state` the state and
`nvidia.gpu.health.reason` why) and by `hw.status` (opt-in: the hardware conventions' shape, a
series per state, 1 on the current one).

Computed once per GPU per cycle from the readings that cycle already took (no NVML call of
its own) and the XID counts. The rules, most serious first (each that matches adds its reason
to `nvidia.gpu.health.reason`; the state is the worst of them):

failed
  - `row_remap_failure`: nvidia.gpu.memory.row_remap.failure is 1 (the GPU needs service);
  - `xid_<code>`: an XID of the "failed" class (`FAILED_XIDS`: the GPU fell off the bus, an
    uncontained or unrecovered ECC error, firmware (GSP) errors, ...) within `XID_HOLD_S`.
degraded
  - `xid_<code>`: an XID of the "degraded" class (`DEGRADED_XIDS`: contained ECC errors,
    row-remap/page-retirement events, NVLink errors) within `XID_HOLD_S`;
  - `row_remap_pending`, `retired_pages_pending`: a reset is needed to apply a repair;
  - `clock_<reason>`: the clocks are held down by hw_slowdown, hw_thermal, hw_power_brake or
    sw_thermal (power_cap under load is normal and does not count);
  - `pcie_width`: the PCIe link runs on fewer lanes than it can;
  - `pcie_generation`: the link runs below its generation while the GPU is at least half busy
    (an idle GPU lowers the generation on purpose);
  - `nvlink_down`: an NVLink is inactive.
XIDs that applications cause (13, 31, 43, 45, ...) do not change the state.

A rule whose input metric is switched off is not evaluated (its reason never appears). A lost
GPU is `failed` with the reason `gpu_lost` (and `nvidia.gpu.up` 0). A MIG instance is `ok` while
it answers and `failed` (`gpu_lost`) once its GPU is lost; the reasons live on its GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from otelgpu.pdata.model import Attributes, NumberDataPoint
from otelgpu.receivers.nvml.fields_parity import (
    CLOCK_EVENT_REASON,
    HEALTH_REASON,
    HW_STATE,
    PCIE_LINK_LIMIT,
)

XID_HOLD_S = 3600.0  # an XID keeps its GPU degraded/failed this long after it last occurred
# NVIDIA's XID catalogue: errors after which the GPU needs a reset (or service) ...
FAILED_XIDS = frozenset({48, 62, 64, 79, 95, 119, 120, 140, 143, 154, 157, 158, 161, 167, 171, 172})
# ... and errors that the driver contained, or that announce a repair or a link problem.
DEGRADED_XIDS = frozenset(
    {63, 74, 92, 94, 121, 136, 137, 144, 145, 146, 147, 148, 149, 150, 155, 156, 160, 168}
)
SLOWDOWN_REASONS = frozenset({"hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal"})
STATES = ("ok", "degraded", "failed")
BUSY = 0.5  # the utilization above which a lowered PCIe generation counts as degraded
SUMMARIES = 256  # (state, reason) pairs kept built; a node sees a handful

Points = Mapping[str, Sequence[NumberDataPoint]]


def _values(points: Points, metric: str) -> Sequence[NumberDataPoint]:
    return points.get(metric, ())


def _flag(points: Points, metric: str) -> bool:
    return any(p.value == 1 for p in _values(points, metric))


def _by(points: Points, metric: str, key: str) -> dict[object, int | float]:
    return {p.attributes.get(key): p.value for p in _values(points, metric)}


def reading_reasons(points: Points) -> tuple[list[str], list[str]]:
    """(failed reasons, degraded reasons) from one cycle's readings of one GPU."""
    failed, degraded = [], []
    if _flag(points, "nvidia.gpu.memory.row_remap.failure"):
        failed.append("row_remap_failure")
    if _flag(points, "nvidia.gpu.memory.row_remap.pending"):
        degraded.append("row_remap_pending")
    if _flag(points, "nvidia.gpu.memory.retired_pages.pending"):
        degraded.append("retired_pages_pending")
    for p in _values(points, "nvidia.gpu.clock.event.active"):
        reason = p.attributes.get(CLOCK_EVENT_REASON)
        if p.value == 1 and reason in SLOWDOWN_REASONS:
            degraded.append(f"clock_{reason}")
    width = _by(points, "nvidia.gpu.pcie.link.width", PCIE_LINK_LIMIT)
    if "current" in width and "max" in width and width["current"] < width["max"]:
        degraded.append("pcie_width")
    gen = _by(points, "nvidia.gpu.pcie.link.generation", PCIE_LINK_LIMIT)
    busy = [p.value for p in _values(points, "hw.gpu.utilization")]
    lowered = "current" in gen and "max" in gen and gen["current"] < gen["max"]
    if lowered and busy and busy[0] >= BUSY:
        degraded.append("pcie_generation")
    if any(p.value == 0 for p in _values(points, "nvidia.gpu.nvlink.state")):
        degraded.append("nvlink_down")
    return failed, degraded


class HealthSummary:
    """Turns each cycle's readings into the GPU's health summary; remembers when XIDs last rose."""

    def __init__(self) -> None:
        # GPU UUID → XID code → (count last seen, time it last rose, ns)
        self._xids: dict[str, dict[int, tuple[int, int]]] = {}

    def _recent_xids(self, uuid: str, counts: Mapping[int, int], now_ns: int) -> list[int]:
        seen = self._xids.setdefault(uuid, {})
        recent = []
        for code, count in counts.items():
            held = seen.get(code)
            if held is None or count > held[0]:
                seen[code] = held = (count, now_ns)
            if now_ns - held[1] <= XID_HOLD_S * 1e9:
                recent.append(code)
        return sorted(recent)

    def lost(self, uuid: str, xids: Mapping[int, int], now_ns: int) -> tuple[str, str]:
        """A lost GPU: failed, `gpu_lost` first, then its XIDs as they would count if it still
        answered (XID 79 before the loss says why it was lost)."""
        reasons = ["gpu_lost"]
        for code in self._recent_xids(uuid, xids, now_ns):
            if code in FAILED_XIDS or code in DEGRADED_XIDS:
                reasons.append(f"xid_{code}")
        return "failed", ",".join(reasons)

    def state(
        self, uuid: str, points: Points, xids: Mapping[int, int], now_ns: int
    ) -> tuple[str, str]:
        """(the GPU's hw.state, its reasons joined by commas; "" when ok)."""
        failed, degraded = reading_reasons(points)
        for code in self._recent_xids(uuid, xids, now_ns):
            if code in FAILED_XIDS:
                failed.append(f"xid_{code}")
            elif code in DEGRADED_XIDS:
                degraded.append(f"xid_{code}")
        state = "failed" if failed else "degraded" if degraded else "ok"
        return state, ",".join(failed + degraded)


# The point attributes are shared and never changed: one dict per (state, reason) serves every
# cycle (a device keeps its points' attributes per dict; a new dict each cycle would grow that).
@functools.lru_cache(maxsize=SUMMARIES)
def summary_attributes(state: str, reason: str) -> Attributes:
    """The health summary as `nvidia.gpu.up` carries it."""
    return {HW_STATE: state, HEALTH_REASON: reason}


@functools.lru_cache(maxsize=SUMMARIES)
def status_points(state: str, reason: str) -> tuple[tuple[Attributes, int], ...]:
    """One (attributes, value) per hw.state: 1 on `state`, which alone carries the reason."""
    return tuple(
        (summary_attributes(s, reason if s == state else ""), 1 if s == state else 0)
        for s in STATES
    )
