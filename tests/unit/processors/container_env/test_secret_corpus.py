"""The planted-secret corpus through the real processor, both Prometheus namings, OTLP and
the debug exporter.

Every entry of `tests/data/secret_corpus.yaml` is planted in the container's env and labels
and in the pod's labels and annotations. Under every include form the contract allows (`*`
on labels and pod labels with globs that have a literal part on env and annotations, and
every planted key named exactly but those only a glob can refuse), no canary may appear in
either `/metrics` body, in the OTLP request bytes, in the debug exporter's detailed output,
or in any log record captured at debug; the business keys next to them must arrive (so a
leak would be seen), every ordinary value named exactly arrives whole, and every refusal is
counted by reason.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.debug.exporter import render
from otelgpu.exporters.otlp.encode import encode_bytes
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata.model import Batch
from otelgpu.processors.container_env.audit import REFUSED
from otelgpu.processors.container_env.values import GLOB_REASONS
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.processors.container_env.corpus import SOURCES, Planted, load
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import by_workload, counter, make_processor

CID, SID = "c" * 64, "s" * 64
TAG = "36c0ffee"  # fixed: the same canaries every run
PLANTED = load(TAG)
PREFIXES = {
    "env": "container.env.",
    "labels": "container.label.",
    "pod_labels": "k8s.pod.label.",
    "annotations": "k8s.pod.annotation.",
}


def _runtime(planted: Planted) -> FakeRuntime:
    rt = FakeRuntime()
    rt.sandbox(
        SID,
        "ml",
        "corpus-0",
        labels=planted.sources["pod_labels"].values,
        annotations=planted.sources["annotations"].values,
    )
    rt.workload(
        CID,
        "ml",
        "corpus-0",
        "main",
        sandbox_id=SID,
        env=planted.sources["env"].values,
        labels=planted.sources["labels"].values,
    )
    return rt


MODES = ["globs", "every key named"]


def _filters(mode: str) -> dict[str, Any]:
    if mode == "globs":
        return {
            "labels": {"include": ["*"]},
            "pod_labels": {"include": ["*"]},
            "env": {"include": PLANTED.sources["env"].globs()},
            "annotations": {"include": PLANTED.sources["annotations"].globs()},
        }
    return {source: {"include": PLANTED.sources[source].named()} for source in SOURCES}


async def _exported(batch: Batch, naming: str) -> str:
    telemetry = SelfTelemetry()
    cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", "naming": naming})
    settings = make_settings(f"prometheus/{naming}", Kind.EXPORTER, telemetry)
    exporter = PrometheusExporter(settings, cfg, clock=FakeClock().monotonic)
    await exporter.consume(batch)
    await exporter.refresh()
    return exporter.body.plain.decode()


@pytest.mark.parametrize("mode", MODES)
async def test_no_planted_secret_leaves_the_node(
    mode: str, caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.DEBUG)
    telemetry = SelfTelemetry()
    proc = make_processor(
        telemetry,
        [(_runtime(PLANTED), True)],
        clock,
        max_attributes=1024,
        max_value_length=4096,
        **_filters(mode),
    )
    await proc.start(FakeHost(telemetry))
    try:
        batch = proc.process((by_workload("ml", "corpus-0", "main"),))
        resource = batch[0].resource
        places: dict[str, str | bytes] = {
            "resource": repr(dict(resource)),
            "otel /metrics": await _exported(batch, "otel"),
            "dcgm /metrics": await _exported(batch, "dcgm"),
            "OTLP request": encode_bytes(batch),
            "debug exporter": "\n".join(render(batch, detailed=True)),
        }
    finally:
        await proc.shutdown()
    places["log"] = "\n".join(
        f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records
    )
    leaked = {where: PLANTED.leaked(text) for where, text in places.items()}
    assert {where: found for where, found in leaked.items() if found} == {}
    for source in SOURCES:  # the business keys arrive: a leak next to them would be seen
        for key, value in PLANTED.sources[source].business.items():
            assert resource.get(PREFIXES[source] + key) == value, (source, key)
    assert 'env_TEAM="vision"' in places["dcgm /metrics"]
    assert b"vision" in places["OTLP request"]
    # Of what was planted, only business and ordinary values arrive; named, every ordinary
    # value arrives whole. Every other included key is refused and counted, by reason.
    refused_ordinary = 0
    for source, prefix in PREFIXES.items():
        planted = PLANTED.sources[source]
        arrived = {k[len(prefix) :]: v for k, v in resource.items() if k.startswith(prefix)}
        arrived = {k: v for k, v in arrived.items() if k in planted.values}
        assert set(arrived) - set(planted.ordinary) == set(planted.business), source
        for key, value in arrived.items():
            assert value == planted.values[key], (source, key)
        if mode == "every key named":
            assert set(planted.ordinary) <= set(arrived), source
        refused_ordinary += len(set(planted.ordinary) - set(arrived))
    secrets = sum(len(s.secrets()) for s in PLANTED.sources.values())
    glob_only = sum(len(s.glob_only) for s in PLANTED.sources.values())
    included = secrets - (0 if mode == "globs" else glob_only)
    assert counter(telemetry, REFUSED) == included + refused_ordinary
    glob_refusals = sum(counter(telemetry, REFUSED, reason=reason) for reason in GLOB_REASONS)
    if mode == "every key named":  # no glob, no glob rule
        assert glob_refusals == 0 and refused_ordinary == 0
    else:  # the plain-value rule refuses what no value check knows
        assert glob_refusals >= refused_ordinary > 0
