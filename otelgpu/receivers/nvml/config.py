"""Configuration of the `nvml` receiver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer, PlainValidator, field_validator, model_validator

from otelgpu.config.types import (
    Duration,
    MetricToggle,
    PositiveDuration,
    Size,
    StrictModel,
    check_metric_names,
)
from otelgpu.pdata.model import AttrValue
from otelgpu.receivers.nvml import counters_csv, replay
from otelgpu.receivers.nvml.counters_select import Selection, select
from otelgpu.receivers.nvml.metrics import CATALOG, HEALTH_INPUTS, HEALTH_METRICS

# NVML sources the simulated backend can be told to answer NOT_SUPPORTED for.
SIMULATABLE_SOURCES: tuple[str, ...] = tuple(
    sorted(
        {
            name
            for spec in CATALOG
            for source in spec.sources
            for name in source.partition(":")[2].split(",")
            if name != "health"
        }
    )
)


class Backend(Enum):
    """Where readings come from. `auto` means `nvml` wherever the NVML library is present (a
    leftover `simulated:` block never replaces real GPUs), and `simulated` only on a node
    without NVML that has a `simulated:` block (resources marked `otelgpu.simulated=true`).
    `replay` answers from a board recorded on real silicon (`replay:`), and only when named."""

    AUTO = "auto"
    NVML = "nvml"
    SIMULATED = "simulated"
    REPLAY = "replay"


class DcgmDevices(Enum):
    """Which of the receiver's devices the Prometheus exporter's `naming: dcgm` serves, as
    dcgm-exporter's `-d` (`--devices`) chooses them. `flex` (its default, `f`): a GPU with MIG
    instances as its instances, the GPU itself left out, and a GPU without instances as itself;
    `gpus` (`g`): every GPU, no instance; `instances` (`i`): every MIG instance, no GPU (a GPU
    without MIG has none to serve); `all`: every GPU and every instance, as `naming: otel`
    serves them (dcgm-exporter has no such choice). An instance served in its GPU's place
    carries the GPU's device-level readings there, as DCGM answers them for an instance.
    `naming: otel` and the push exporters serve every device whatever it says."""

    FLEX = "flex"
    GPUS = "gpus"
    INSTANCES = "instances"
    ALL = "all"


# dcgm-exporter's `-d` letters and the choice each one is.
_DCGM_LETTERS = {"f": "flex", "g": "gpus", "i": "instances"}


class MetricSet(Enum):
    """Which catalog metrics are on before the per-metric `metrics` switches: `default` (the
    lean set, each metric's `enabled` in the catalog) or `all` (every metric)."""

    DEFAULT = "default"
    ALL = "all"


class SimulatedMig(StrictModel):
    """A MIG instance of a simulated GPU."""

    uuid: str | None = None
    profile: str = "1g.10gb"
    placement_start: int | None = Field(default=None, ge=0)  # default: after the previous ones


class SimulatedProcess(StrictModel):
    """A process using a simulated GPU (its pid is mapped through `host_proc` like a real one).

    Its `used_memory` counts in the GPU's used memory; processes asking together for more than
    the GPU (or its first MIG instance, where they run) holds are reported scaled down to fit.
    """

    pid: int = Field(gt=0)
    used_memory: Size = 1 << 30


class SimulatedXid(StrictModel):
    """An XID error the simulated GPU reports `after` this long."""

    code: int = Field(gt=0)
    after: Duration = 0.0


def _check_sources(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in SIMULATABLE_SOURCES]
    if unknown:
        raise ValueError(
            f"unknown NVML source {', '.join(unknown)} (valid: {', '.join(SIMULATABLE_SOURCES)})"
        )
    return names


class SimulatedGpu(StrictModel):
    """One simulated GPU; every field has a default derived from its index."""

    uuid: str | None = None
    model: str = "NVIDIA H100 80GB HBM3"
    minor: int | None = Field(default=None, ge=0)  # /dev/nvidia<minor>; default: the index
    memory: Size = 80 << 30
    mig: list[SimulatedMig] = Field(default_factory=list)
    processes: list[SimulatedProcess] = Field(default_factory=list)
    lost_after: Duration | None = None
    unsupported_fields: list[str] = Field(default_factory=list)
    xid_errors: list[SimulatedXid] = Field(default_factory=list)
    gpm: bool = True

    _sources = field_validator("unsupported_fields")(_check_sources)


class SimulatedConfig(StrictModel):
    """`simulated:` deterministic GPUs for demos and tests (see the README for every option).

    gpus: a count, or a list of `SimulatedGpu`.
    unsupported_fields: NVML fields/calls answered NOT_SUPPORTED on every GPU.
    library_missing: `true` makes every NVML init fail as if libnvidia-ml.so were absent;
    a number N makes only the first N attempts fail.
    """

    gpus: int | list[SimulatedGpu] = Field(default=1)
    unsupported_fields: list[str] = Field(default_factory=list)
    library_missing: bool | int = False

    _sources = field_validator("unsupported_fields")(_check_sources)

    @field_validator("gpus")
    @classmethod
    def _gpu_count(cls, value: int | list[SimulatedGpu]) -> int | list[SimulatedGpu]:
        if isinstance(value, int) and not 0 <= value <= 64:
            raise ValueError("gpus must be between 0 and 64")
        return value

    def gpu_list(self) -> list[SimulatedGpu]:
        """The GPUs as a list, defaults filled in for a plain count."""
        return (
            [SimulatedGpu() for _ in range(self.gpus)] if isinstance(self.gpus, int) else self.gpus
        )


class ReplayConfig(StrictModel):
    """`replay:` the recorded board the `replay` backend answers from.

    board: a record shipped with otelgpu, by name (`nvidia-h100`, `nvidia-h200`).
    path: a record of one's own (`scripts/nvml_record`'s `nvml-profile.json`), in place of
    `board`.
    phase: which recorded conditions to answer from: `load` (a matrix product, ~99 % busy) or
    `idle`.
    The record is read and checked when the config is validated, and again when NVML opens.
    """

    board: str = replay.DEFAULT_BOARD
    path: str | None = None
    phase: str = replay.DEFAULT_PHASE

    @model_validator(mode="after")
    def _one_record(self) -> ReplayConfig:
        if self.path is not None and "board" in self.model_fields_set:
            raise ValueError("board and path both choose the record: give one")
        replay.read_record(self.record_path(), self.phase)
        return self

    def record_path(self) -> str:
        """The record's path: `path`, else the shipped record of `board`."""
        return self.path if self.path is not None else str(replay.board_path(self.board))


def _read_counters(value: Any) -> Selection:
    """A counters CSV path → what it selects. Read while the config is validated (its rows
    are part of the config: `validate` lists them, a reload reads the file again)."""
    if isinstance(value, Selection):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected the path of a dcgm-exporter counters CSV")
    return select(value, counters_csv.read(value))


CountersCsv = Annotated[
    Selection,
    PlainValidator(_read_counters),
    PlainSerializer(lambda selection: selection.path, return_type=str),
]


class NvmlReceiverConfig(StrictModel):
    """`receivers::nvml`.

    collection_interval: how often GPUs are read (10s).
    devices: `all`, or a list of NVML indexes and/or GPU UUIDs to read (one may be written
    without the list: `devices: 0`).
    dcgm_devices: which of them `naming: dcgm` serves (`DcgmDevices`; `flex`, dcgm-exporter's
    default).
    metric_set: `default` (the lean set: dcgm-exporter's default counters and health) or `all`
    (every catalog metric); `metrics` switches override it per metric.
    metrics: `{NAME: {enabled: bool}}` overrides of the metric set (docs/metrics.md).
    counters_csv: a dcgm-exporter counters CSV (`-f` file): emit exactly the fields it lists,
    in place of `metric_set` (`metrics` switches still apply on top). Read when the config is
    loaded and on every reload; `otelgpu validate` lists the rows otelgpu cannot serve.
    processes: read each GPU's processes, each mapped to its container: the squatter count,
    and the per-process metrics where they are switched on (false).
    host_proc: where the host's /proc is mounted, for pid → container mapping (/proc).
    backend: `auto` (nvml where the library is present; simulated only where it is absent and a
    `simulated:` block is given), `nvml`, `simulated`, `replay`.
    simulated: the simulated GPUs (only read when the backend is simulated).
    replay: the recorded board (only with `backend: replay`; its defaults without the block).
    """

    collection_interval: PositiveDuration = 10.0
    devices: Literal["all"] | list[int | str] = "all"
    dcgm_devices: DcgmDevices = DcgmDevices.FLEX
    metric_set: MetricSet = MetricSet.DEFAULT
    metrics: dict[str, MetricToggle] = Field(default_factory=dict)
    counters_csv: CountersCsv | None = None
    processes: bool = False
    host_proc: str = "/proc"
    backend: Backend = Backend.AUTO
    simulated: SimulatedConfig | None = None
    replay: ReplayConfig | None = None

    @field_validator("devices", mode="before")
    @classmethod
    def _one_device(cls, value: object) -> object:
        """One index or UUID written without a list (`devices: 0`, `devices: GPU-...`)."""
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, str) and value != "all":
            return [value]
        return value

    @field_validator("dcgm_devices", mode="before")
    @classmethod
    def _dcgm_letters(cls, value: object) -> object:
        """dcgm-exporter's own spelling (`f`, `g:0,1`) gets the choice it stands for named."""
        letter = value.partition(":")[0] if isinstance(value, str) else None
        if letter in _DCGM_LETTERS:
            choice = _DCGM_LETTERS[letter]
            raise ValueError(
                f"{value!r} is dcgm-exporter's -d spelling: write {choice} (GPU indexes and "
                "UUIDs go in devices:)"
            )
        return value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: dict[str, MetricToggle]) -> dict[str, MetricToggle]:
        check_metric_names(value, [spec.name for spec in CATALOG])
        return value

    @model_validator(mode="after")
    def _one_metric_set(self) -> NvmlReceiverConfig:
        if self.counters_csv is not None and "metric_set" in self.model_fields_set:
            raise ValueError(
                "counters_csv and metric_set both choose the metrics: give one (the CSV's "
                "fields, or a metric set), and switch single metrics under metrics"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _replay_defaults(cls, data: Any) -> Any:
        """`backend: replay` without a `replay:` block replays the defaults, whose record is
        checked here with the rest of the config (not when the receiver is built)."""
        replay = isinstance(data, dict) and data.get("backend") in ("replay", Backend.REPLAY)
        if replay and data.get("replay") is None:
            return {**data, "replay": {}}
        return data

    @model_validator(mode="after")
    def _replay_block_with_its_backend(self) -> NvmlReceiverConfig:
        if self.replay is not None and self.backend is not Backend.REPLAY:
            raise ValueError(
                f"replay: is read only with backend: replay (backend is {self.backend.value})"
            )
        return self

    def enabled_metrics(self) -> frozenset[str]:
        """The catalog names to emit: the metric set (or the counters CSV's), then the
        `metrics` overrides."""
        everything = self.metric_set is MetricSet.ALL
        chosen = self.counters_csv.metrics if self.counters_csv is not None else None
        return frozenset(
            spec.name
            for spec in CATALOG
            if (
                self.metrics[spec.name].enabled
                if spec.name in self.metrics
                else (spec.name in chosen if chosen is not None else everything or spec.enabled)
            )
        )

    def kept_points(self) -> Mapping[str, tuple[str, frozenset[AttrValue]]]:
        """Per metric that is several dcgm fields, the attribute and values of those the
        counters CSV lists (its other points are dropped); empty without a CSV. A metric
        switched on under `metrics` keeps all its points."""
        if self.counters_csv is None:
            return {}
        only = self.counters_csv.only
        return {m: kept for m, kept in only.items() if m not in self.metrics}

    def config_notes(self) -> tuple[str, ...]:
        """What `validate` tells beside a valid config: the counters CSV's rows otelgpu does
        not serve as is, each with the reason."""
        if self.counters_csv is None:
            return ()
        return (self.counters_csv.summary(), *self.counters_csv.notes())

    def read_metrics(self) -> frozenset[str]:
        """The catalog names to read: those emitted, and the inputs of the health summary's
        rules while a metric carrying it is on (read for it, not emitted)."""
        enabled = self.enabled_metrics()
        return enabled | HEALTH_INPUTS if enabled & HEALTH_METRICS else enabled

    def use_simulated(self, nvml_present: Callable[[], bool]) -> bool:
        """Whether the simulated backend serves this receiver (`nvml_present` is asked only
        for `auto` with a `simulated:` block)."""
        if self.backend is Backend.AUTO:
            return self.simulated is not None and not nvml_present()
        return self.backend is Backend.SIMULATED
