"""The planted-secret corpus through the real processor, both Prometheus namings and OTLP.

Every entry of `tests/data/secret_corpus.yaml` is planted in the container's env and labels
and in the pod's labels and annotations. With `include: ["*"]` on every source, and with
every planted key named exactly (but those only a glob can refuse), no canary may appear in either `/metrics` body, in the OTLP
request bytes, or in any log record captured at debug; the business keys next to them must
arrive (so a leak would be seen), and every refusal is counted by reason.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
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


def _filters(mode: str) -> dict[str, Any]:
    if mode == "include everything":
        return {source: {"include": ["*"]} for source in SOURCES}
    return {source: {"include": PLANTED.sources[source].named()} for source in SOURCES}


async def _exported(batch: Batch, naming: str) -> str:
    telemetry = SelfTelemetry()
    cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", "naming": naming})
    settings = make_settings(f"prometheus/{naming}", Kind.EXPORTER, telemetry)
    exporter = PrometheusExporter(settings, cfg, clock=FakeClock().monotonic)
    await exporter.consume(batch)
    await exporter.refresh()
    return exporter.body.plain.decode()


@pytest.mark.parametrize("mode", ["include everything", "every key named"])
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
    # Every included key that is not business is refused and counted, by reason; under a
    # glob, the plain-value rule refuses what no value check knows.
    included = [
        len(s.values) - len(s.business) - (0 if mode == "include everything" else len(s.glob_only))
        for s in PLANTED.sources.values()
    ]
    assert counter(telemetry, REFUSED) == sum(included)
    glob_refusals = sum(counter(telemetry, REFUSED, reason=reason) for reason in GLOB_REASONS)
    glob_only = sum(len(s.glob_only) for s in PLANTED.sources.values())
    assert glob_refusals == (glob_only if mode == "include everything" else 0)
    for source, prefix in PREFIXES.items():  # of what was planted, only business arrives
        planted_keys = PLANTED.sources[source].values
        arrived = {k[len(prefix) :] for k in resource if k[len(prefix) :] in planted_keys}
        assert arrived == set(PLANTED.sources[source].business), source
