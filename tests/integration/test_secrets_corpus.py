"""The planted-secret corpus end to end: no canary leaves the agent, whatever is included.

Real peers (PEERS.md): a private containerd holding one GPU pod whose env, container labels,
pod labels and annotations each carry every entry of `tests/data/secret_corpus.yaml`; the
real CLI as a child process (nvml simulated, k8s_attributes on the test's pod-resources
server), logging at debug; two Prometheus exporters (otel and dcgm naming) and the OTLP gRPC
and HTTP exporters sending to a real rotel. Once the business keys arrive everywhere, no
canary may appear in either `/metrics` body, in rotel's output, in the debug exporter's
detailed output or the rest of the agent's log, or in `print-config`; run under globs (`*` on
container and pod labels, globs with a literal part on env and annotations) and with every
planted key named exactly (but the values only the plain-value rule for glob-matched keys
can refuse). Named, every ordinary business value of the corpus arrives whole.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.secrets_pipeline import SecretsRun, secrets_pipeline, secrets_run
from tests.peers.cri_records import Pod
from tests.peers.kubelet import FakeKubelet
from tests.peers.rotel import Rotel
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.corpus import SOURCES, Planted, load

pytestmark = pytest.mark.integration

TAG = "36c0ffee"  # fixed: the same canaries every run

GPU = "GPU-5150000-0000-4000-8000-000000000036"
MODES = ["globs", "every key named"]


def _config(
    mode: str,
    planted: Planted,
    containerd: Containerd,
    kubelet: FakeKubelet,
    otlp: Rotel,
    ports: list[int],
) -> dict[str, Any]:
    filters = {source: {"include": planted.sources[source].named()} for source in SOURCES}
    if mode == "globs":
        filters = {
            source: {"include": ["*"] if "labels" in source else planted.sources[source].globs()}
            for source in SOURCES
        }
    return secrets_pipeline(
        gpu=GPU,
        containerd=containerd,
        kubelet=kubelet,
        otlp=otlp,
        ports=ports,
        node_name="corpus-node",
        filters=filters,
        max_attributes=1024,
        otlp_http=True,
        debug_exporter=True,
    )


@pytest.fixture(params=MODES)
async def run(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SecretsRun, str, Planted]]:
    planted = load(TAG)
    pod = Pod(
        "ml",
        "corpus-pod",
        uid="uid-corpus",
        labels=planted.sources["pod_labels"].values,
        annotations=planted.sources["annotations"].values,
    )
    mode = request.param
    async with secrets_run(
        tmp_path,
        pod=pod,
        gpu=GPU,
        env=planted.sources["env"].values,
        labels=planted.sources["labels"].values,
        pipeline=lambda containerd, kubelet, otlp, ports: _config(
            mode, planted, containerd, kubelet, otlp, ports
        ),
    ) as agent_run:
        yield agent_run, mode, planted


def _enriched(otel: str, dcgm: str, rotel_text: str) -> bool:
    """Each output carries the business labels of all four sources and both OTLP exporters
    have delivered them."""
    return (
        all(
            f'{label}="cc-42"' in otel
            for label in (
                "container_env_COST_CENTER",
                "container_label_COST_CENTER",
                "k8s_pod_label_COST_CENTER",
                "k8s_pod_annotation_COST_CENTER",
            )
        )
        and 'env_TEAM="vision"' in dcgm
        and rotel_text.count("container.env.TEAM: Str(vision)") >= 2
        and "otelgpu_container_env_refused_keys_total" in otel
    )


async def test_no_planted_secret_leaves_the_agent(run: tuple[SecretsRun, str, Planted]) -> None:
    agent_run, mode, planted = run
    places = await agent_run.outputs(_enriched)
    await asyncio.to_thread(agent_run.agent.stop)  # flush: the log is complete after exit
    places["agent log"] = agent_run.agent.output
    places["print-config"] = subprocess.run(
        [sys.executable, "-m", "otelgpu", "print-config", "-c", str(agent_run.config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "container_env:" in places["print-config"]
    leaked = {where: planted.leaked(text) for where, text in places.items()}
    assert {where: found for where, found in leaked.items() if found} == {}
    assert "Traceback" not in places["agent log"]
    # The refusals are visible by reason; under a glob, also the plain-value rule's.
    otel = places["otel /metrics"]
    for reason in ("secret_key", "credential_pair", "credential_flag", "credential_header"):
        assert f'reason="{reason}"' in otel, reason
    assert ('reason="glob_random_value"' in otel) == (mode == "globs")
    assert "not exporting env key 'SETTING_00'" in places["agent log"]  # by name, once
    assert places["agent log"].count("not exporting env key 'SETTING_00'") == 1
    if mode == "every key named":  # every ordinary value arrives whole, through OTLP too
        for key, value in planted.sources["env"].ordinary.items():
            assert f"container.env.{key}: Str({value})" in places["rotel output"], key
