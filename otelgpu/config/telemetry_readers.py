"""`service::telemetry::metrics::readers`: the Collector's way to serve its own metrics apart.

Only the pull reader with a Prometheus exporter is honoured: the agent then serves its
`otelgpu_*` series at `http://host:port/metrics`, and no longer beside the pipelines' series on
the prometheus exporters' endpoints. Everything else of the Collector's reader shape gets an
error saying what to write instead: a periodic reader (the agent pushes through a configured
exporter, `service::telemetry::metrics::exporters`), another pull exporter, and the naming
options whose other value would rename the series the shipped alerts read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from otelgpu.config.positions import Path
from otelgpu.config.types import StrictModel

_KEEP_NAMES = "the shipped alerts and dashboards read the agent's own series by these names"
# Options of the Collector's Prometheus pull exporter that only one value of is honoured here.
_FIXED: dict[str, tuple[object, str]] = {
    "without_units": (False, f"the unit suffixes (_seconds) stay: {_KEEP_NAMES}"),
    "without_type_suffix": (False, f"the counter suffix (_total) stays: {_KEEP_NAMES}"),
    "without_scope_info": (True, "the agent's own series carry no scope labels or scope info"),
    "translation_strategy": (
        "UnderscoreEscapingWithSuffixes",
        f"names are served as declared, with their suffixes: {_KEEP_NAMES}",
    ),
}
_REFUSED = {
    "with_resource_constant_labels": (
        "the agent's own series carry no resource labels; the scrape's target labels say "
        "which agent they come from"
    ),
}
_PUSH = (
    "to push the agent's own metrics, list a configured exporter (an otlp exporter, say) in "
    "service::telemetry::metrics::exporters (every interval)"
)


class PrometheusPullConfig(StrictModel):
    """`pull::exporter::prometheus`: where the agent's own metrics are served (`/metrics`).

    host: the address to listen on (`localhost`, as in the Collector, answers this node only;
    `0.0.0.0` or `::` every interface). port: required; 0 picks a free one (logged).
    """

    host: str = "localhost"
    port: int = Field(ge=0, le=65535)
    without_units: bool = False
    without_type_suffix: bool = False
    without_scope_info: bool = True
    translation_strategy: Literal["UnderscoreEscapingWithSuffixes"] = (
        "UnderscoreEscapingWithSuffixes"
    )

    @model_validator(mode="before")
    @classmethod
    def _honoured_values(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        found = [
            f"{key}: {_shown(data[key])} is not supported here: {why}"
            for key, (value, why) in _FIXED.items()
            if key in data and data[key] != value
        ]
        found += [
            f"{key} (a Collector option) is not supported here: {why}"
            for key, why in _REFUSED.items()
            if key in data
        ]
        if found:
            raise ValueError("; ".join(found))
        return data

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) to bind, brackets removed from an IPv6 host."""
        return self.host.strip("[]"), self.port

    @property
    def endpoint(self) -> str:
        """`host:port` as the other listeners' endpoints are written (IPv6 in brackets)."""
        host = self.host.strip("[]")
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


class PullExporterConfig(StrictModel):
    """`pull::exporter`: only `prometheus` can be pulled from."""

    prometheus: PrometheusPullConfig

    @model_validator(mode="before")
    @classmethod
    def _prometheus_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and (others := sorted(str(k) for k in data if k != "prometheus")):
            only = "only a prometheus exporter can be pulled from here"
            raise ValueError(f"{', '.join(others)}: {only}; {_PUSH}")
        return data


class PullReaderConfig(StrictModel):
    """`readers[]::pull`."""

    exporter: PullExporterConfig


class MetricReaderConfig(StrictModel):
    """One entry of `readers`: a pull reader (`pull::exporter::prometheus::{host, port}`)."""

    pull: PullReaderConfig

    @model_validator(mode="before")
    @classmethod
    def _no_periodic(cls, data: Any) -> Any:
        if isinstance(data, dict) and "periodic" in data:
            raise ValueError(f"periodic (a Collector reader) is not supported here: {_PUSH}")
        return data


def reader_endpoints(readers: list[MetricReaderConfig]) -> list[tuple[Path, str, str]]:
    """(path of the port, `host:port`, who) of every pull reader, for `lint.port_conflicts`."""
    port: Path = ("pull", "exporter", "prometheus", "port")
    return [
        (
            ("service", "telemetry", "metrics", "readers", i, *port),
            reader.pull.exporter.prometheus.endpoint,
            "the telemetry reader",
        )
        for i, reader in enumerate(readers)
    ]


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)
