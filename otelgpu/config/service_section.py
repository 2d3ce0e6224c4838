"""The `service` section's models: which components run, how they are wired, and the agent's
own telemetry (`service::telemetry`: its logs and metrics).

The Collector's telemetry keys that have no equivalent here are refused with what to do
instead (`_COLLECTOR_ONLY`), every one of them in one message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from otelgpu.config.telemetry_readers import MetricReaderConfig
from otelgpu.config.types import PositiveDuration, StrictModel


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


# The Collector's `service::telemetry` keys that have no equivalent here, with what to do.
_STDERR = "the agent logs to standard error only (the container log): collect it there"
_COLLECTOR_ONLY = {
    "logs": {
        "output_paths": _STDERR,
        "error_output_paths": _STDERR,
        "development": "there is no development mode: use level: debug",
        "sampling": "repeated messages are already limited per message (docs/troubleshooting.md)",
        "disable_caller": "log lines carry no caller",
        "disable_stacktrace": "stack traces are logged at debug only",
        "initial_fields": "log lines carry no extra fields",
        "processors": "logs are not exported",
    },
    "metrics": {
        "address": (
            "the agent's own metrics are served on every prometheus exporter's endpoint; to "
            "serve them on their own, write readers: [{pull: {exporter: {prometheus: "
            "{host, port}}}}]"
        ),
        "views": "every self-metric is kept as declared",
    },
    "telemetry": {
        "resource": "the agent's own metrics carry service.name, version and instance id",
        "traces": "the agent records no traces",
    },
}


class LogsConfig(StrictModel):
    """`service::telemetry::logs`: the agent's own log output.

    level: debug, info, warn (or warning), error; any case, as the Collector reads them.
    encoding: console or json. `otelgpu run --log-level/--log-format` override both.
    The Collector's other keys (output_paths, sampling, ...) get an error saying why (see
    `TelemetryConfig`).
    """

    level: Annotated[
        Literal["debug", "info", "warn", "warning", "error"], BeforeValidator(_lower)
    ] = "info"
    encoding: Literal["console", "json"] = "console"


class MetricsTelemetryConfig(StrictModel):
    """`service::telemetry::metrics`: the agent's own metrics.

    They are served by every Prometheus exporter, unless `readers` names a pull endpoint of
    their own (then only there); `exporters` lists exporters that also receive them every
    `interval` (e.g. an OTLP exporter, or debug). level: the
    Collector's basic, normal or detailed, accepted and alike here (every self-metric is
    kept); none is refused, since the shipped alerts read these metrics.
    """

    exporters: list[str] = Field(default_factory=list)
    interval: PositiveDuration = 10.0
    readers: list[MetricReaderConfig] = Field(default_factory=list)
    level: Annotated[Literal["basic", "normal", "detailed"], BeforeValidator(_lower)] = "normal"

    @model_validator(mode="before")
    @classmethod
    def _no_level_none(cls, data: Any) -> Any:
        if isinstance(data, dict) and _lower(data.get("level")) == "none":
            raise ValueError(
                "level: none is not supported: the agent's own metrics (otelgpu_*) are what "
                "the shipped alerts and docs/troubleshooting.md read; drop them downstream "
                "with a relabelling rule if they must go"
            )
        return data


class TelemetryConfig(StrictModel):
    """`service::telemetry`."""

    logs: LogsConfig = Field(default_factory=LogsConfig)
    metrics: MetricsTelemetryConfig = Field(default_factory=MetricsTelemetryConfig)

    @model_validator(mode="before")
    @classmethod
    def _collector_keys(cls, data: Any) -> Any:
        # Every Collector-only key, of this section and the two below it, in one message.
        if not isinstance(data, dict):
            return data
        found = [
            f"{prefix}{key} (a Collector option) is not supported here: {why}"
            for section, prefix, part in (
                ("telemetry", "", data),
                ("logs", "logs::", data.get("logs")),
                ("metrics", "metrics::", data.get("metrics")),
            )
            if isinstance(part, dict)
            for key, why in sorted(_COLLECTOR_ONLY[section].items())
            if key in part
        ]
        if found:
            raise ValueError("; ".join(found))
        return data


class PipelineSpec(StrictModel):
    """`service::pipelines::metrics[/name]`."""

    receivers: list[str] = Field(default_factory=list)
    processors: list[str] = Field(default_factory=list)
    exporters: list[str] = Field(default_factory=list)


class ServiceConfig(StrictModel):
    """`service`: which components run, and how they are wired."""

    extensions: list[str] = Field(default_factory=list)
    pipelines: dict[str, PipelineSpec] = Field(default_factory=dict)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
