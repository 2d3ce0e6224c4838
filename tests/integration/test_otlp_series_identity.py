"""The running agent pushes two processes on one GPU over OTLP/HTTP to the real rotel receiver,
and what arrives stays two series per metric for a backend that keeps only point attributes
and `job`/`instance`, as Prometheus' OTLP endpoint does by default: `job` from `service.name`,
`instance` from `service.instance.id`, every other resource attribute left on `target_info`.

Why rotel and not Prometheus 3 itself: the Prometheus 3 the tests can install (Debian sid's,
`tests/peers/prometheus3.py`) is built with its OTLP ingestion disabled (Debian's changelog:
"Disable OTLP Ingestion endpoint", pending golang-opentelemetry-collector in Debian), so it
refuses `--web.enable-otlp-receiver` as an unknown flag; the last test here checks that, so the
day Debian's build has the receiver this test is moved onto it. Until then the Prometheus side
is the translation's published rule, applied here to what the real receiver got.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelgpu import __version__
from tests.integration.agent_process import AgentProcess
from tests.peers.prometheus3 import prometheus3_binary
from tests.peers.rotel import ResourceOut, Rotel, rotel

pytestmark = pytest.mark.integration

NODE = "gpu-node-under-test"
PIDS = (4242, 4343)
# The semantic conventions' namespace for a service.instance.id taken from a stable name.
INSTANCE = str(uuid.uuid5(uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320"), NODE))

AGENT = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    processes: true
    metrics:
      nvidia.gpu.process.memory.usage: {{enabled: true}}
      nvidia.gpu.process.utilization: {{enabled: true}}
      nvidia.gpu.process.memory.busy: {{enabled: true}}
    simulated:
      gpus:
        - processes: [{{pid: {pids[0]}}}, {{pid: {pids[1]}}}]
exporters:
  otlp_http:
    endpoint: {endpoint}
    compression: none
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [otlp_http]
"""

Series = tuple[str, tuple[tuple[str, object], ...]]


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Rotel]:
    with rotel(tmp_path / "rotel") as peer:
        yield peer


@pytest.fixture
def agent(tmp_path: Path, receiver: Rotel) -> Iterator[AgentProcess]:
    config = tmp_path / "agent.yaml"
    config.write_text(AGENT.format(pids=PIDS, endpoint=receiver.http_endpoint))
    # NODE_NAME is dcgm-exporter's variable, which the agent also reads: only ours is set.
    process = AgentProcess("run", "-c", str(config), env={"K8S_NODE_NAME": NODE, "NODE_NAME": ""})
    try:
        yield process
    finally:
        process.stop()


def prometheus_series(rm: ResourceOut) -> set[Series]:
    """The series Prometheus' OTLP endpoint makes of a resource's points without promoting
    resource attributes: the metric name, the point's attributes, and `job` (`service.name`,
    prefixed by `service.namespace/` when there is one) and `instance`
    (`service.instance.id`)."""
    namespace = rm.attributes.get("service.namespace")
    job = (
        f"{namespace}/{rm.attributes['service.name']}"
        if namespace
        else rm.attributes["service.name"]
    )
    target = (("instance", rm.attributes["service.instance.id"]), ("job", job))
    return {
        (metric.name, tuple(sorted((*point.attributes.items(), *target), key=str)))
        for metric in rm.metrics
        for point in metric.points
    }


def both_processes(resources: list[ResourceOut]) -> bool:
    return {r.attributes.get("process.pid") for r in resources} >= set(PIDS)


async def test_two_processes_on_one_gpu_stay_two_series_without_resource_attributes(
    receiver: Rotel, agent: AgentProcess
) -> None:
    resources = await receiver.wait_for(both_processes, timeout=30)
    for rm in resources:  # every resource: the GPU's, each process's
        service = {k: v for k, v in rm.attributes.items() if k.startswith("service.")}
        assert service == {
            "service.name": "otelgpu",
            "service.instance.id": INSTANCE,
            "service.version": __version__,
        }
    # The first resource that arrived for each process.
    first = {
        pid: next(r for r in resources if r.attributes.get("process.pid") == pid) for pid in PIDS
    }
    series = {pid: prometheus_series(rm) for pid, rm in first.items()}
    assert series[PIDS[0]] and series[PIDS[1]]
    assert not series[PIDS[0]] & series[PIDS[1]]  # before: the same series, twice
    for pid, rm in first.items():
        for metric in rm.metrics:
            assert {p.attributes.get("process.pid") for p in metric.points} == {pid}, metric.name
    # Each process metric is one series per pid, told apart by the pid label.
    names = {name for name, _ in series[PIDS[0]]}
    for name in names:
        pids = {
            dict(labels)["process.pid"]
            for pid in PIDS
            for metric, labels in series[pid]
            if metric == name
        }
        assert pids == set(PIDS), name
    # And the device's own series do not collide with the processes' either.
    gpu = next(r for r in resources if "process.pid" not in r.attributes)
    assert not prometheus_series(gpu) & (series[PIDS[0]] | series[PIDS[1]])
    assert agent.proc.poll() is None


def test_the_installable_prometheus3_has_no_otlp_receiver() -> None:
    """Why the test above uses rotel; fails once Debian's Prometheus 3 has the receiver (then
    push to its /api/v1/otlp/v1/metrics and query it instead)."""
    binary = prometheus3_binary()  # installs once; fails (never skips) when it cannot
    result = subprocess.run(
        [binary, "--web.enable-otlp-receiver", "--version"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "unknown long flag '--web.enable-otlp-receiver'" in result.stderr
