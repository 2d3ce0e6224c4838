"""What the readers of one collection cycle share: the cycle, how one NVML read is run and
its failure kept to that read, and how a reading becomes a point of a metric.

`collect.Collector` reads each device's fields, calls and health; `gpm.GpmReader` its GPM
samples; `processes.ProcessReader` the processes on it. Each adds points through `add_point`
and runs its NVML calls through one `Guard`, which turns a lost GPU into `GpuLost`, remembers
what NVML refused for good, and counts any other failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ParamSpec, TypeAlias, TypeVar

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Attributes, Metric, NumberDataPoint
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.devices import Device
from otelgpu.receivers.nvml.metrics import BY_NAME, CATALOG
from otelgpu.receivers.nvml.nvml import NvmlError

_NAMES = tuple(spec.name for spec in CATALOG)  # the order metrics appear in a resource
_MONOTONIC = frozenset(spec.name for spec in CATALOG if spec.monotonic)
_DOUBLE = frozenset(spec.name for spec in CATALOG if spec.double)

P = ParamSpec("P")
T = TypeVar("T")

# One resource's points of a cycle, by metric name.
Points: TypeAlias = dict[str, list[NumberDataPoint]]


class GpuLost(Exception):
    """The device answered NVML_ERROR_GPU_IS_LOST."""


class Failed:
    """The result of a read that failed (None is a valid answer of some NVML calls)."""


FAILED = Failed()


@dataclass(frozen=True, slots=True)
class Cycle:
    """What one cycle shares across devices: its timestamp and the counters' start time."""

    now_ns: int
    start_ns: int
    xids: Mapping[str, Mapping[int, int]]  # GPU UUID → XID code → count, latest XID last
    xid_gpus: frozenset[str] = frozenset()  # the GPUs whose XIDs are watched


class Guard:
    """Runs one NVML read at a time for a receiver; a failure costs that read only."""

    def __init__(self, telemetry: SelfTelemetry, receiver: str) -> None:
        self._telemetry = telemetry
        self._receiver = receiver

    def __call__(
        self, device: Device, key: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T | Failed:
        """Runs `call`; FAILED when it failed (remembered under `key` when NVML refused it for
        good). A lost GPU raises GpuLost: the caller marks the device down."""
        try:
            return call(*args, **kwargs)
        except NvmlError as exc:
            if exc.code == nvml.ERROR_GPU_IS_LOST:
                raise GpuLost from None
            if exc.code in nvml.UNSUPPORTED_CODES:
                device.unsupported.add(key)
            else:
                self.error(key)
        except Exception:  # a bug or a surprising answer: counted, the cycle goes on
            self.error(key)
        return FAILED

    def error(self, source: str) -> None:
        self._telemetry.count(
            "otelgpu_nvml_read_errors_total",
            1,
            receiver=self._receiver,
            source=source,
        )


def add_point(
    points: Points,
    metric: str,
    attributes: Attributes,
    cycle: Cycle,
    value: int | float,
    device: Device,
) -> None:
    point = NumberDataPoint(
        # hw.id and hw.type on the point too (the conventions require them there): an
        # OTLP consumer that drops resource attributes still tells the GPUs apart.
        attributes=device.point_attributes(attributes),
        time_unix_nano=cycle.now_ns,
        value=float(value) if metric in _DOUBLE else value,
        start_time_unix_nano=cycle.start_ns if metric in _MONOTONIC else 0,
    )
    bucket = points.get(metric)
    if bucket is None:
        points[metric] = [point]
    else:
        bucket.append(point)


def metrics_of(points: Points) -> tuple[Metric, ...]:
    """The points as metrics, in the catalog's order."""
    if len(points) > 1:
        return tuple(_metric(name, points[name]) for name in _NAMES if name in points)
    return tuple(_metric(name, found) for name, found in points.items())


def _metric(name: str, points: list[NumberDataPoint]) -> Metric:
    spec = BY_NAME[name]
    return Metric(
        name=spec.name,
        unit=spec.unit,
        description=spec.description,
        kind=spec.kind,
        monotonic=spec.monotonic,
        points=tuple(points),
    )
