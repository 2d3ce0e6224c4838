"""The real CLI as a child process: run, signals, reload, exit codes."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess, scrape, scrape_until
from tests.peers.ports import free_port as _free_port

pytestmark = pytest.mark.integration

# Tries come quickly, and go on until the agent stops.
FAST_RETRY = "{initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0s}"

PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 2}}
processors:
  filter:
    metrics: {{include: [hw.gpu.utilization]}}
  attributes:
    actions:
      - {{key: pipeline_tag, action: upsert, value: {tag}}}
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    logs: {{level: info}}
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [filter, attributes]
      exporters: [debug]
"""


def test_run_filters_and_labels_then_stops_cleanly_on_sigterm(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'hw\.gpu\.utilization\{.*"pipeline_tag": "v1"')
    agent.wait_for(r"batch: 2 resources", timeout=5)
    assert code_of(agent) == 0
    points = [line for line in agent.lines if " = " in line]
    assert points and all("hw.gpu.utilization" in line for line in points)  # the filter held
    assert "stopped" in agent.lines[-1]


def test_sigint_also_stops_cleanly(tmp_path: Path, agents: list[AgentProcess]) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')
    assert agent.stop(signal.SIGINT) == 0


def test_sighup_with_a_broken_file_keeps_the_old_pipelines(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')

    config.write_text(
        PIPELINE.format(tag="v2").replace("200ms", "soon").replace("filter:\n", "filtr:\n", 1)
    )
    agent.send(signal.SIGHUP)
    first = agent.wait_for(
        r"reload rejected: .*pipeline\.yaml:\d+:\d+: receivers::nvml::collection_interval: invalid duration"
    )
    agent.wait_for(
        r"reload rejected: .*pipeline\.yaml:\d+:\d+: processors::filtr: unknown processor type",
        after=0,
    )
    agent.wait_for(r"keeping the running configuration")
    agent.wait_for(r'"pipeline_tag": "v1"', after=first)  # the old pipelines still run

    config.write_text(PIPELINE.format(tag="v2"))
    agent.send(signal.SIGHUP)
    agent.wait_for(r"configuration reloaded")
    agent.wait_for(r'"pipeline_tag": "v2"')
    assert agent.stop() == 0


def test_a_bad_config_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(PIPELINE.format(tag="v1").replace("gpus: 2", "gpus: two"))
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "run", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{config}:5:" in result.stderr and "receivers::nvml::simulated::gpus" in result.stderr
    assert "starting" not in result.stderr


def test_a_component_that_cannot_start_exits_1_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = tmp_path / "pipeline.yaml"
        text = PIPELINE.format(tag="v1").replace(
            "service:\n",
            f"extensions:\n  health_check: {{endpoint: 127.0.0.1:{port}}}\nservice:\n  extensions: [health_check]\n",
            1,
        )
        config.write_text(text)
        result = subprocess.run(
            [sys.executable, "-m", "otelgpu", "run", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert 'failed to start "health_check" extension' in result.stderr


def code_of(agent: AgentProcess) -> int:
    return agent.stop(signal.SIGTERM)


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        (
            "verbosity: detailed",
            "verbosity: !!bool maybe",
            r"pipeline\.yaml:14:16: exporters::debug::verbosity: invalid !!bool value \"maybe\"",
        ),
        (
            "simulated: {gpus: 2}",
            "simulated: &a {gpus: *a}",
            r"pipeline\.yaml:5:26: receivers::nvml::simulated::gpus: alias \*a refers to "
            r"a node that contains it",
        ),
    ],
    ids=["bool_maybe_keyerror", "recursive_alias"],
)
def test_sighup_with_a_file_the_yaml_library_chokes_on_keeps_the_agent(
    tmp_path: Path, agents: list[AgentProcess], old: str, new: str, error: str
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')

    config.write_text(PIPELINE.format(tag="v2").replace(old, new))
    agent.send(signal.SIGHUP)
    first = agent.wait_for(r"reload rejected: .*" + error)
    agent.wait_for(r"keeping the running configuration", after=first)
    agent.wait_for(r'"pipeline_tag": "v1"', after=first)  # the old pipelines still run
    assert agent.proc.poll() is None
    assert not any("Traceback" in line for line in agent.lines)

    config.write_text(PIPELINE.format(tag="v3"))
    agent.send(signal.SIGHUP)
    agent.wait_for(r"configuration reloaded")
    agent.wait_for(r'"pipeline_tag": "v3"')
    assert agent.stop() == 0


def test_sighup_with_an_alias_bomb_is_refused_and_the_agent_keeps_serving(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    port = _free_port()
    serving = PIPELINE.format(tag="v1").replace(
        "  debug:\n", f"  prometheus:\n    endpoint: 127.0.0.1:{port}\n  debug:\n", 1
    )
    serving = serving.replace("exporters: [debug]", "exporters: [debug, prometheus]")
    config = tmp_path / "pipeline.yaml"
    config.write_text(serving)
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')
    scrape_until(port, "hw_gpu_utilization")

    config.write_text(serving + alias_bomb(9))  # ~10**9 nodes once expanded
    agent.send(signal.SIGHUP)
    first = agent.wait_for(
        r"reload rejected: .*pipeline\.yaml:\d+:\d+: x-bomb::l\d::\d: alias \*l\d expands beyond "
        r"the limit of 10000 alias uses"
    )
    agent.wait_for(r"keeping the running configuration", after=first)
    assert "hw_gpu_utilization" in scrape(port)  # still serving, same pipelines
    assert agent.stop() == 0


def alias_bomb(levels: int) -> str:
    """The "billion laughs": each level is a list of ten aliases of the level below."""
    lines = ["x-bomb:", '  l0: &l0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"  l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("extra", "sets", "expected"),
    [
        (
            alias_bomb(9),
            [],
            r"bad\.yaml:\d+:\d+: x-bomb::l4::7: alias \*l3 expands beyond the limit of "
            r"10000 alias uses \(an alias bomb\?\)",
        ),
        (
            "",
            ["receivers.nvml.simulated.gpus=!!int abc"],
            r'--set #1:1:31: receivers::nvml::simulated::gpus: invalid !!int value "abc"',
        ),
        (
            "",
            ["receivers.nvml.collection_interval={x: [}"],
            r"--set #1:1:41: receivers::nvml::collection_interval: syntax error: "
            r"expected the node content, but found '}'",
        ),
        (
            "",
            ["receivers.nvml.collection_interval=99999999999999999999h"],
            r"--set #1:1:36: receivers::nvml::collection_interval: duration "
            r'"99999999999999999999h" is too long: at most 168h \(7 days\)',
        ),
    ],
    ids=["alias_bomb", "set_bad_int", "set_syntax_error", "set_absurd_duration"],
)
def test_validate_refuses_hostile_yaml_with_exit_2_and_one_located_line(
    tmp_path: Path, extra: str, sets: list[str], expected: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(PIPELINE.format(tag="v1") + extra)
    overrides = [arg for value in sets for arg in ("--set", value)]
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", "-c", str(config), *overrides],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "otelgpu: invalid configuration (1 issue):"
    assert len(lines) == 2 and re.fullmatch(expected, lines[1].removeprefix(f"{tmp_path}/")), lines


def _serving_config(metrics_port: int, health_port: int) -> str:
    config = PIPELINE.format(tag="v1").replace(
        "  debug:\n", f"  prometheus:\n    endpoint: 127.0.0.1:{metrics_port}\n  debug:\n", 1
    )
    config = config.replace("exporters: [debug]", "exporters: [debug, prometheus]")
    config = config.replace("collection_interval: 200ms", "collection_interval: 1s")
    config = config.replace(
        "service:\n",
        f"extensions:\n  health_check: {{endpoint: '127.0.0.1:{health_port}'}}\n"
        "service:\n  extensions: [health_check]\n",
        1,
    )
    return config


class _Poller(threading.Thread):
    """GETs one URL every 20 ms until told to stop; keeps every body and every failure."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.bodies: list[str] = []
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    self.bodies.append(response.read().decode())
            except Exception as exc:  # refused, reset, 5xx: every one is a failure to report
                self.failures.append(f"{type(exc).__name__}: {exc}")

    def answered(self) -> int:
        return len(self.bodies) + len(self.failures)

    def wait_for_answers(self, count: int) -> None:
        """Waits until `count` more requests were answered (or failed), 20 s at most."""
        target, deadline = self.answered() + count, time.monotonic() + 20
        while self.answered() < target:
            assert time.monotonic() < deadline, "the poller stopped getting answers"
            time.sleep(0.01)


def test_valid_reloads_keep_the_ports_open_and_the_last_body_served(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    metrics_port, health_port = _free_port(), _free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(_serving_config(metrics_port, health_port))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')
    scrape_until(metrics_port, "hw_gpu_utilization")
    metrics = _Poller(f"http://127.0.0.1:{metrics_port}/metrics")
    health = _Poller(f"http://127.0.0.1:{health_port}/healthz")
    metrics.start(), health.start()
    try:
        seen = 0
        for _ in range(6):  # the same valid file each time
            agent.send(signal.SIGHUP)
            seen = agent.wait_for(r"configuration reloaded", after=seen) + 1
    finally:
        metrics.done.set(), health.done.set()
        metrics.join(15), health.join(15)
    assert metrics.failures == [] and health.failures == []
    assert len(health.bodies) > 6  # probed through the reloads
    empty = [i for i, body in enumerate(metrics.bodies) if "hw_gpu_utilization" not in body]
    assert empty == [], f"{len(empty)} of {len(metrics.bodies)} scrapes had no GPU series"
    assert all('"alive"' in body for body in health.bodies)
    assert agent.stop() == 0


def test_a_reload_that_moves_the_port_releases_the_old_one(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    old_port, new_port, health_port = _free_port(), _free_port(), _free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(_serving_config(old_port, health_port))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'"pipeline_tag": "v1"')
    scrape_until(old_port, "hw_gpu_utilization")

    config.write_text(_serving_config(new_port, health_port))
    agent.send(signal.SIGHUP)
    agent.wait_for(r"configuration reloaded")
    agent.wait_for(rf"serving http://127\.0\.0\.1:{new_port}/metrics \(otel naming\)$")
    with pytest.raises(OSError):  # refused: nothing listens there any more
        socket.create_connection(("127.0.0.1", old_port), timeout=5).close()
    scrape_until(new_port, "hw_gpu_utilization")  # the new pipeline's first body, then GPU series
    assert agent.stop() == 0


def test_json_logs_from_the_very_first_line(tmp_path: Path, agents: list[AgentProcess]) -> None:
    """A load-time warning, the start line, the debug exporter's points and the stop line:
    every line the agent writes is one JSON object, the debug exporter's attributes JSON too."""
    import json

    config = tmp_path / "pipeline.yaml"
    text = PIPELINE.format(tag="v1").replace("logs: {level: info}", "logs: {encoding: json}")
    config.write_text(text.replace("exporters:\n  debug:", "exporters:\n  debug/unused:\n  debug:"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r'pipeline_tag\\": \\"v1')
    assert code_of(agent) == 0
    records = [json.loads(line) for line in agent.lines]
    assert "debug/unused" in records[0]["msg"] and records[0]["level"] == "warn"
    assert records[1]["msg"].startswith("otelgpu ") and "starting with" in records[1]["msg"]
    point = next(r["msg"] for r in records if "hw.gpu.utilization" in r["msg"])
    attributes = json.loads(point[point.index("{") : point.index("} = ") + 1])
    assert attributes["pipeline_tag"] == "v1"
    assert records[-1]["msg"] == "stopped"


def test_log_format_flag_makes_config_errors_json_too(tmp_path: Path) -> None:
    import json

    config = tmp_path / "bad.yaml"
    config.write_text(PIPELINE.format(tag="v1").replace("gpus: 2", "gpus: two"))
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "run", "-c", str(config), "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert len(records) == 1 and records[0]["level"] == "error"
    assert f"{config}:5:" in records[0]["msg"] and "simulated::gpus" in records[0]["msg"]


def test_json_logs_hold_for_grpc_and_a_plaintext_receiver_gets_the_http_hint_once(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    """The README's `otlp` example (an endpoint without a scheme: TLS) against a plaintext
    receiver (the real rotel): every try fails its TLS handshake. gRPC's C core would print one
    line of its own format per try; with `--log-format json` every line stays JSON, and the
    agent says once what to change."""
    import json

    from tests.peers.rotel import rotel
    from tests.peers.tcp_relay import tcp_relay

    with rotel(tmp_path / "rotel") as receiver, tcp_relay(receiver.grpc_port) as relay:
        config = tmp_path / "pipeline.yaml"
        config.write_text(
            PIPELINE.format(tag="v1")
            .replace(
                "  debug:\n    verbosity: detailed",
                f"  otlp:\n    endpoint: {relay.endpoint}\n    retry_on_failure: {FAST_RETRY}",
            )
            .replace("[debug]", "[otlp]")
        )
        agent = AgentProcess("run", "-c", str(config), "--log-format", "json")
        agents.append(agent)
        relay.wait_for_connections(4)  # four handshakes tried, each one refused
        assert code_of(agent) == 0
    for line in agent.lines:
        try:
            json.loads(line)
        except ValueError:
            raise AssertionError(f"not JSON: {line!r}\nall output:\n{agent.output}") from None
    hints = [line for line in agent.lines if f"use http://{relay.endpoint}" in line]
    assert len(hints) == 1, agent.output
    assert json.loads(hints[0])["level"] == "warn"
