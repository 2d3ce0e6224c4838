"""The chart serves the agent's own metrics (`otelgpu_*`) on a port of their own by default, as
the Collector serves its own telemetry: the GPU endpoint's `/metrics` holds GPU series only
(dcgm-exporter's e2e label check holds there), and the Service and the ServiceMonitor carry the
telemetry port under the same job and relabelings, so the shipped alerts on `otelgpu_*` still
get their series with the labels they group by."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.config import load_config
from otelgpu.service.builtins import builtin_registry
from tests.deploy import helm, sync
from tests.deploy.test_helm import by_name, render
from tests.deploy.test_manifests import agent, one
from tests.integration.agent_process import AgentProcess, scrape_until
from tests.peers.ports import free_port

Doc = dict[str, Any]
OWN = re.compile(r"^(# (HELP|TYPE) )?otelgpu_", re.MULTILINE)
# The agent's own series the shipped rules read (both namings' rules files).
RULE_SERIES = re.compile(r"\botelgpu_[a-z_]+\b(?!:)")


def overrides(docs: tuple[Doc, ...]) -> list[str]:
    """The `--set` overrides the chart gives the agent."""
    args: list[str] = agent(docs)["args"]
    return [args[i + 1] for i, arg in enumerate(args) if arg == "--set"]


def ports(docs: tuple[Doc, ...]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in agent(docs)["ports"]}


def loaded(docs: tuple[Doc, ...], tmp_path: Path) -> Any:
    """The configuration the agent runs: the chart's pipeline with the chart's overrides."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"])
    environ = {"K8S_NODE_NAME": "gpu-node-1"}
    return load_config([str(path)], builtin_registry(), overrides(docs), environ)


def test_by_default_the_agents_own_metrics_leave_the_gpu_endpoint(tmp_path: Path) -> None:
    for naming in ("otel", "dcgm"):
        docs = render(naming=naming)
        config = loaded(docs, tmp_path)
        (reader,) = config.telemetry.metrics.readers
        pull = reader.pull.exporter.prometheus
        assert (pull.host, pull.port) == ("0.0.0.0", 8888)
        assert ports(docs) == {
            "metrics": 9400,
            "telemetry": 8888,
            "gpu-status": 9401,
            "health": 13133,
        }
        service = {p["name"]: p for p in one(docs, "Service")["spec"]["ports"]}
        assert service["telemetry"] == {
            "name": "telemetry",
            "port": 8888,
            "targetPort": "telemetry",
            "protocol": "TCP",
        }


def test_the_servicemonitor_scrapes_the_telemetry_port_as_the_gpu_port() -> None:
    monitor = one(
        render(serviceMonitor={"relabelings": [{"action": "labeldrop", "regex": "x"}]}),
        "ServiceMonitor",
    )
    endpoints = {e["port"]: e for e in monitor["spec"]["endpoints"]}
    gpu, own = endpoints["metrics"], endpoints["telemetry"]
    assert own["path"] == "/metrics" and own["scheme"] == "http"
    # Same job (jobLabel is the Service's), same node label, same honoured labels: the rules'
    # `by (k8s_node_name)` and `up{job="otelgpu"}` read both endpoints alike.
    for key in ("honorLabels", "relabelings", "interval", "scrapeTimeout"):
        assert own[key] == gpu[key], key
    assert {"action": "labeldrop", "regex": "x"} in own["relabelings"]


def test_the_rules_read_only_series_the_telemetry_endpoint_serves() -> None:
    """Every `otelgpu_*` series a shipped alert reads is one of the agent's own (served on the
    telemetry port): none is expected on the GPU endpoint."""
    from otelgpu.component.telemetry_table import INSTRUMENTS

    declared = {i.name for i in INSTRUMENTS}
    for rules in (sync.RULES, sync.DCGM_RULES):
        exprs = [
            rule["expr"]
            for group in yaml.safe_load(rules.read_text())["groups"]
            for rule in group["rules"]
            if "alert" in rule
        ]
        read = {name for expr in exprs for name in RULE_SERIES.findall(expr)}
        assert read and read <= declared, (rules.name, read - declared)


def test_own_port_off_keeps_them_beside_the_gpu_series(tmp_path: Path) -> None:
    docs = render(telemetry={"ownPort": False})
    assert loaded(docs, tmp_path).telemetry.metrics.readers == []
    assert "telemetry" not in ports(docs)
    assert "telemetry" not in [p["name"] for p in one(docs, "Service")["spec"]["ports"]]
    assert "telemetry" not in [e["port"] for e in one(docs, "ServiceMonitor")["spec"]["endpoints"]]


def test_the_telemetry_port_follows_its_value(tmp_path: Path) -> None:
    docs = render(telemetry={"port": 18888})
    (reader,) = loaded(docs, tmp_path).telemetry.metrics.readers
    assert reader.pull.exporter.prometheus.port == 18888 == ports(docs)["telemetry"]
    assert {p["name"]: p["port"] for p in one(docs, "Service")["spec"]["ports"]}["telemetry"] == (
        18888
    )


def test_a_pipeline_of_your_own_gets_the_telemetry_port_too(tmp_path: Path) -> None:
    """The chart's overrides reach whatever pipeline runs, so the scraped port is listened on."""
    own = yaml.safe_load(sync.PIPELINE.read_text())
    del own["exporters"]["otlp"]
    own["service"]["pipelines"]["metrics/gpu"]["exporters"].remove("otlp")
    docs = render(pipeline={"config": yaml.safe_dump(own)})
    (reader,) = loaded(docs, tmp_path).telemetry.metrics.readers
    assert reader.pull.exporter.prometheus.port == 8888
    # Readers of its own are replaced (docs/deploy.md says so); its other telemetry keys stay.
    pull = {"pull": {"exporter": {"prometheus": {"host": "0.0.0.0", "port": 9999}}}}
    own["service"]["telemetry"] = {"metrics": {"readers": [pull], "interval": "30s"}}
    metrics = loaded(render(pipeline={"config": yaml.safe_dump(own)}), tmp_path).telemetry.metrics
    assert [r.pull.exporter.prometheus.port for r in metrics.readers] == [8888]
    assert metrics.interval == 30.0
    mine = render(pipeline={"config": yaml.safe_dump(own)}, telemetry={"ownPort": False})
    kept = loaded(mine, tmp_path).telemetry.metrics.readers
    assert [r.pull.exporter.prometheus.port for r in kept] == [9999]


SIMULATED = """\
receivers:
  nvml: {{backend: simulated, collection_interval: 1s, simulated: {{gpus: 1}}}}
exporters:
  prometheus: {{endpoint: "127.0.0.1:{port}", naming: dcgm}}
service:
  pipelines:
    metrics: {{receivers: [nvml], exporters: [prometheus]}}
"""


def test_the_agent_run_with_the_charts_overrides_serves_its_own_metrics_apart(
    tmp_path: Path,
) -> None:
    """The real agent, given the chart's `--set` overrides: its GPU endpoint holds no
    `otelgpu_*` series, the telemetry port holds every one the rules read that exists yet."""
    exporter, telemetry = free_port(), free_port()
    docs = render(telemetry={"port": telemetry})
    config = tmp_path / "pipeline.yaml"
    config.write_text(SIMULATED.format(port=exporter))
    sets = [arg for pair in (("--set", o) for o in overrides(docs)) for arg in pair]
    process = AgentProcess("run", "-c", str(config), *sets)
    try:
        process.wait_for(rf"own metrics on http://0\.0\.0\.0:{telemetry}/metrics")
        process.wait_for(r"started 1 pipelines")  # the exporter listens from here on
        gpus = scrape_until(exporter, "DCGM_FI_DEV_GPU_UTIL{")
        assert OWN.findall(gpus) == [], gpus
        own = scrape_until(telemetry, 'otelgpu_source_up{source="nvml"} 1')
        assert "DCGM_FI_" not in own
        assert process.stop() == 0
    finally:
        process.kill()


def test_a_telemetry_port_the_agent_already_uses_is_refused_by_name() -> None:
    for taken in (9400, 13133):
        with pytest.raises(helm.engine().HelmRenderError, match=rf"telemetry\.port {taken} is"):
            helm.render({"telemetry": {"port": taken}})
