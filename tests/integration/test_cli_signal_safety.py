"""The real CLI under signals that come at awkward times and files that never answer: a SIGHUP
while the agent imports and reads its files is never fatal, and a `${file:}` naming a FIFO
neither hangs `validate` nor a SIGHUP reload (after which SIGTERM still stops the agent)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.agent_process import AgentProcess

pytestmark = pytest.mark.integration

PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 1}}
processors:
  attributes:
    actions:
      - {{key: pipeline_tag, action: upsert, value: "{tag}"}}
exporters:
  debug:
    verbosity: detailed
service:
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [attributes]
      exporters: [debug]
"""
READY = r'"pipeline_tag": "v1"'
STARTING = r"otelgpu \S+ starting with"
# `-X importtime` writes a line as each module is imported: the events a SIGHUP is sent on.
# The first module of the agent's own that the CLI imports (after the entry point held SIGHUP).
FIRST_AGENT_IMPORT = r"^import time:.*\|\s+otelgpu\.component"


def test_sighup_from_the_first_imports_on_never_kills_the_agent(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    """One SIGHUP on every line the agent writes from its first imports until it says it is
    starting (its files read), and one more then: those that came before the loop handled
    signals are held, and reload once it runs."""
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config), env={"PYTHONPROFILEIMPORTTIME": "1"})
    agents.append(agent)
    line = agent.wait_for(FIRST_AGENT_IMPORT)
    sent = 0
    while not _matches(STARTING, agent.lines[line]):
        agent.send(signal.SIGHUP)
        sent += 1
        try:
            line = agent.wait_for(r"", after=line + 1)  # the next line
        except AssertionError:
            pytest.fail(f"the agent died (exit {agent.proc.wait(10)}) after {sent} SIGHUPs")
    agent.send(signal.SIGHUP)
    agent.wait_for(READY, after=line)
    assert agent.proc.poll() is None, agent.output[-4000:]
    assert sent > 10  # SIGHUPs landed while it imported and read its files
    agent.wait_for(r"SIGHUP came while starting: reloading once started")
    agent.wait_for(r"configuration reloaded")
    assert agent.stop() == 0
    assert not any("Traceback" in text for text in agent.lines)


def test_validate_refuses_a_file_substitution_naming_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag=f"${{file:{fifo}}}"))
    try:
        result = subprocess.run(
            [sys.executable, "-m", "otelgpu", "validate", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,  # guards against the defect (a validate that never returns)
        )
    except subprocess.TimeoutExpired:
        pytest.fail("validate blocked on the FIFO")
    assert result.returncode == 2, result.stderr
    assert (
        f'pipeline.yaml:9:52: processors::attributes::actions::0::value: cannot read "${{file:{fifo}}}": '
        "not a regular file (a FIFO)"
    ) in result.stderr


def test_a_reload_naming_a_fifo_is_rejected_and_sigterm_still_stops(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(tag="v1"))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(READY)

    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    config.write_text(PIPELINE.format(tag=f"${{file:{fifo}}}"))
    agent.send(signal.SIGHUP)
    first = agent.wait_for(r"reload rejected: .*not a regular file \(a FIFO\)")
    agent.wait_for(r"keeping the running configuration", after=first)
    agent.wait_for(READY, after=first)  # the old pipelines still run
    assert agent.stop() == 0


def _matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None
