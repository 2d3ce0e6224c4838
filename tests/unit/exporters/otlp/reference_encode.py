"""The reference the wire encoder is held to: the same request built from opentelemetry-proto
messages field by field (the encoder the exporter used before it wrote bytes itself), whose
`SerializeToString` is the wire format by definition."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from otelgpu.pdata.model import Batch, Metric, MetricKind

_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def reference_request(batch: Batch) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    for rm in batch:
        out = request.resource_metrics.add()
        out.resource.attributes.extend(_key_values(rm.resource))
        scope_metrics = out.scope_metrics.add()
        scope_metrics.scope.name = rm.scope
        if rm.scope_version:
            scope_metrics.scope.version = rm.scope_version
        for metric in rm.metrics:
            _metric(scope_metrics.metrics.add(), metric)
        if rm.schema_url:
            out.schema_url = scope_metrics.schema_url = rm.schema_url
    return request


def _metric(out: Any, metric: Metric) -> None:
    out.name, out.unit, out.description = metric.name, metric.unit, metric.description
    if metric.kind is MetricKind.SUM:
        data = out.sum
        data.aggregation_temporality = _CUMULATIVE
        data.is_monotonic = metric.monotonic
    else:
        data = out.gauge
    data.SetInParent()
    for p in metric.points:
        dp = data.data_points.add(time_unix_nano=p.time_unix_nano)
        value = p.value
        if isinstance(value, float):
            dp.as_double = value
        elif _INT64_MIN <= value <= _INT64_MAX:
            dp.as_int = int(value)
        else:
            dp.as_double = float(value)
        if p.start_time_unix_nano:
            dp.start_time_unix_nano = p.start_time_unix_nano
        dp.attributes.extend(_key_values(p.attributes))


def _key_values(attributes: Any) -> list[KeyValue]:
    return [KeyValue(key=k, value=_any_value(v)) for k, v in attributes.items()]


def _any_value(value: Any) -> AnyValue:
    cls = value.__class__
    if cls is str:
        return AnyValue(string_value=value)
    if cls is bool:
        return AnyValue(bool_value=value)
    if cls is int and _INT64_MIN <= value <= _INT64_MAX:
        return AnyValue(int_value=value)
    if cls is float:
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))
