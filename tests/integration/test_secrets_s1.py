"""S1 end to end: under the widest include lists the contract allows, no canary leaves the
agent; a bare wildcard over env or annotations is refused by validate, run and reload.

Real peers (PEERS.md): a private containerd holding the CRI records of one GPU pod, the real
CLI as a child process (nvml simulated, k8s_attributes on the test's pod-resources server,
container_env on that containerd), two Prometheus exporters (otel and dcgm naming) and an
OTLP exporter sending to a real rotel. The pod's env, labels and annotations carry
canaries under secret-like keys, disguised keys, innocent keys with credential-shaped values,
and a `last-applied-configuration` annotation carrying the pod's spec. Each canary value must
appear 0 times in both /metrics bodies, in rotel's output and in the agent's log, while the
business keys next to them do arrive (so the test would see a leak if there were one). Container
and pod labels include `*`; env and annotations, globs with a literal part that match every
key planted there. The env's `MLFLOW_RUN_ID` is also named in its include list: a named key
keeps its hex value, which a glob alone would refuse as random-looking.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.agent_process import AgentProcess
from tests.integration.secrets_pipeline import SecretsRun, secrets_pipeline, secrets_run
from tests.peers.cri_records import Pod
from tests.peers.kubelet import FakeKubelet
from tests.peers.rotel import Rotel
from tests.peers.runtime import Containerd
from tests.unit.processors.container_env.secret_vocabulary import COMMON_SECRET_KEYS

pytestmark = pytest.mark.integration

GPU = "GPU-5150000-0000-4000-8000-000000000001"
_TAG = uuid.uuid4().hex[:8]


def canary(name: str) -> str:
    """A canary value: plain lowercase text, so only the key rules can catch it."""
    return f"canary-{name}-{_TAG}"


JWT = f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYW5hcnkifQ.Zm9vYmFyY2FuYXJ5{_TAG}"
PEM_BODY = f"MIIBszCCAVmgAwIBAgIU{_TAG}Q0FOQVJZ"
TOKEN = f"q8Zr2LmX7vT1kP4nW9sB3yH6{_TAG}"

# Secret-like keys: the value is a canary the key rules must refuse.
SECRET_KEYS = [
    *COMMON_SECRET_KEYS,
    "DB_PASSW\u041eRD",  # Cyrillic O
    "API_TO\u200bKEN",  # zero-width space
    "TE\u0410M_NAME",  # a Cyrillic A in an ordinary-looking key
]
ENV: dict[str, str] = {key: canary(f"env{i}") for i, key in enumerate(SECRET_KEYS)}
ENV.update(
    {
        # Credentials inside URLs under keys that say nothing secret.
        "DATABASE_URL": f"postgres://app:{canary('dburl')}@db.example.com:5432/app",
        "MLFLOW_TRACKING_URI": f"https://ml:{canary('mlflow')}@mlflow.example.com",
        # Credential-shaped values under innocent keys.
        "NOTES": f"Bearer {JWT}",
        "CA_BUNDLE": f"-----BEGIN CERTIFICATE-----\n{PEM_BODY}\n-----END CERTIFICATE-----",
        "CONFIG_VALUE": TOKEN,
        # Business keys: these must arrive.
        "TEAM": "vision",
        "PROJECT": "detector",
        "COST_CENTER": "cc-42",
        "MLFLOW_RUN_ID": "d41d8cd98f00b204e9800998ecf8427e",
    }
)
LABELS = {"com.example.owner": "alice", "com.example.jwt": canary("label-jwt")}
POD_LABELS = {"team": "vision", "example.com/session": canary("pod-label")}
SPEC = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "s1-pod", "namespace": "ml"},
    "spec": {
        "containers": [
            {
                "name": "main",
                "env": [{"name": "APP_SETTING", "value": canary("last-applied")}],
            }
        ]
    },
}
ANNOTATIONS = {
    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(SPEC),
    "example.com/cost-center": "cc-42",
    "example.com/api-key": canary("annotation"),
}
CANARIES = [
    *(ENV[key] for key in SECRET_KEYS),
    canary("dburl"),
    canary("mlflow"),
    JWT,
    PEM_BODY,
    TOKEN,
    canary("label-jwt"),
    canary("pod-label"),
    canary("last-applied"),
    canary("annotation"),
]
# Canary values as the dcgm renderer or a log line could spell them too.
VISIBLE = ["vision", "detector", "cc-42", "d41d8cd98f00b204e9800998ecf8427e", "alice"]


def _config(containerd: Containerd, kubelet: FakeKubelet, otlp: Rotel, ports: list[int]) -> Any:
    everything = {"include": ["*"]}
    # A hex run ID is random-looking: only a key named in the include list exports it. A
    # bare `*` is refused over env and annotations: one glob per first letter of the keys.
    env = {"include": ["MLFLOW_RUN_ID", *sorted({f"{key[0]}*" for key in ENV})]}
    annotations = {"include": ["example.com/*", "kubectl.kubernetes.io/*"]}
    return secrets_pipeline(
        gpu=GPU,
        containerd=containerd,
        kubelet=kubelet,
        otlp=otlp,
        ports=ports,
        node_name="s1-node",
        filters={
            "env": env,
            "labels": everything,
            "pod_labels": everything,
            "annotations": annotations,
        },
        max_attributes=512,
    )


@pytest.fixture
async def run(tmp_path: Path) -> AsyncIterator[SecretsRun]:
    async with secrets_run(
        tmp_path,
        pod=Pod("ml", "s1-pod", uid="uid-s1", labels=POD_LABELS, annotations=ANNOTATIONS),
        gpu=GPU,
        env=ENV,
        labels=LABELS,
        pipeline=_config,
    ) as agent_run:
        yield agent_run


def _enriched(otel: str, dcgm: str, rotel_text: str) -> bool:
    """Each output carries the business labels."""
    return (
        'container_env_TEAM="vision"' in otel
        and 'env_TEAM="vision"' in dcgm
        and "container.env.TEAM: Str(vision)" in rotel_text
        and "otelgpu_container_env_refused_keys_total" in otel
    )


async def test_no_canary_leaves_the_agent_with_include_everything(run: SecretsRun) -> None:
    places = await run.outputs(_enriched)
    for value in VISIBLE:  # what is not refused does arrive: a leak would be seen
        assert all(value in text for text in places.values()), value
    await asyncio.to_thread(run.agent.stop)  # flush: the log is complete after exit
    places["agent log"] = run.agent.output
    leaked = {
        where: [c for c in CANARIES if c in text]
        for where, text in places.items()
        if any(c in text for c in CANARIES)
    }
    assert leaked == {}
    # The refusals are visible: by reason in /metrics, by key name in the log.
    otel = places["otel /metrics"]
    for reason in (
        "secret_key",
        "unsafe_key",
        "spec_annotation",
        "credential_url",
        "jwt",
        "pem",
        "high_entropy",
    ):
        assert f'reason="{reason}"' in otel, reason
    assert "not exporting env key 'DATABASE_URL'" in places["agent log"]
    assert (
        "not exporting annotations key 'kubectl.kubernetes.io/last-applied-configuration'"
        in (places["agent log"])
    )
    assert "Traceback" not in places["agent log"]


def _star_config(env: list[str], labels: list[str]) -> dict[str, Any]:
    return {
        "receivers": {"nvml": {"backend": "simulated", "collection_interval": "200ms"}},
        "processors": {
            "container_env": {
                "runtime": "docker",
                "docker": {"socket": "/nonexistent/docker.sock"},
                "env": {"include": env},
                "labels": {"include": labels},
            }
        },
        "exporters": {"debug": {"verbosity": "basic"}},
        "service": {
            "pipelines": {
                "metrics": {
                    "receivers": ["nvml"],
                    "processors": ["container_env"],
                    "exporters": ["debug"],
                }
            }
        },
    }


REFUSED_STAR = (
    'processors::container_env::env: include "*" matches every env key, and no rule can '
    "tell a password from a run ID by its value: write a glob with a literal part (TEAM_*, "
    '*_RUN_ID, example.com/*) or name the keys (README, "Choosing keys")'
)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bare_wildcard_over_env_is_refused(tmp_path: Path, command: str) -> None:
    path = tmp_path / "star.yaml"
    path.write_text(yaml.safe_dump(_star_config(["TEAM", "*"], [])))
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", command, "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}:" in result.stderr and REFUSED_STAR in result.stderr
    assert "starting" not in result.stderr


def test_a_bare_wildcard_on_reload_keeps_the_running_configuration(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(_star_config(["TEAM"], [])))
    agent = AgentProcess("run", "-c", str(path))
    agents.append(agent)
    agent.wait_for(r"batch: \d+ resources")
    path.write_text(yaml.safe_dump(_star_config(["*"], [])))
    agent.send(signal.SIGHUP)
    first = agent.wait_for(r"reload rejected: .*include \"\*\" matches every env key")
    agent.wait_for(r"keeping the running configuration", after=first)
    agent.wait_for(r"batch: \d+ resources", after=first)  # the old pipelines still run
    assert agent.stop() == 0


def test_validate_warns_about_include_everything_over_labels(tmp_path: Path) -> None:
    path = tmp_path / "star.yaml"
    path.write_text(yaml.safe_dump(_star_config(["TEAM_*"], ["*"])))
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (
        'processors::container_env::labels::include::0: include ["*"] hands labels keys to rules'
        in result.stderr
    )
    assert "exported only when its value is plainly safe" in result.stderr
    assert 'otelgpu_container_env_refused_keys_total{reason="glob_..."}' in result.stderr
