"""SIGHUP's reload path in the Agent: whatever loading raises, the running service is kept,
and the new files are parsed on a worker thread so the event loop keeps serving meanwhile."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from otelgpu.config.loader import load
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.service.agent import Agent
from tests.components import core_registry

PIPELINE = """\
receivers:
  sample: {interval: 1h, tags: [%s]}
exporters:
  debug:
service:
  pipelines:
    metrics: {receivers: [sample], exporters: [debug]}
"""


def config(tag: str) -> AgentConfig:
    return validate(load([("p.yaml", PIPELINE % tag)], environ={}), core_registry())


@pytest.mark.parametrize(
    "error",
    [RuntimeError("a bug in a validator"), RecursionError("deep"), KeyError("maybe")],
    ids=["runtime", "recursion", "key"],
)
async def test_a_reload_whose_loading_raises_anything_keeps_the_running_service(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> AgentConfig:
        raise error

    agent = Agent(broken, core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    while agent.service is None:
        await asyncio.sleep(0.01)
    kept = agent.service
    with caplog.at_level(logging.ERROR, logger="otelgpu"):
        logging.getLogger("otelgpu").addHandler(caplog.handler)
        agent.request_reload()
        while not any("keeping the running" in r.getMessage() for r in caplog.records):
            assert not running.done(), "the agent stopped on a failed reload"
            await asyncio.sleep(0.01)
        logging.getLogger("otelgpu").removeHandler(caplog.handler)
    assert agent.service is kept
    assert any(type(error).__name__ in r.getMessage() for r in caplog.records)
    agent.request_stop()
    await running  # a clean stop: nothing was raised out of run()


async def test_the_reload_parse_runs_off_the_event_loop() -> None:
    loop = asyncio.get_running_loop()
    answered: list[str] = []
    parsed_on: list[threading.Thread] = []

    async def scrape() -> str:
        answered.append("scrape")
        return "body"

    def slow_load() -> AgentConfig:
        # A parse that needs the loop to answer meanwhile: if it ran on the loop, the loop
        # could not run `scrape` and this would wait out its guard and raise.
        parsed_on.append(threading.current_thread())
        asyncio.run_coroutine_threadsafe(scrape(), loop).result(timeout=10)
        return config("v2")

    agent = Agent(slow_load, core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    while agent.service is None:
        await asyncio.sleep(0.01)
    first = agent.service
    agent.request_reload()
    while agent.service is first or agent.service is None:
        assert not running.done(), "the agent stopped during the reload"
        await asyncio.sleep(0.01)
    assert answered == ["scrape"]
    assert parsed_on and parsed_on[0] is not threading.main_thread()
    assert agent.service.config.components == config("v2").components
    agent.request_stop()
    await running


def _reload_series(agent: Agent) -> dict[str, float]:
    assert agent.service is not None
    metrics = agent.service.telemetry.collect().metrics
    return {
        m.name: m.points[0].value
        for m in metrics
        if m.name.startswith("otelgpu_config_") and m.points
    }


async def test_a_rejected_reload_is_a_metric_and_a_good_one_clears_it() -> None:
    """Reloads rejected (invalid file, then a valid one) show in self-telemetry, which the
    OtelgpuConfigReloadFailed alert reads (deploy/rules)."""
    from otelgpu.component.errors import ConfigError, Issue

    answers: list[AgentConfig | Exception] = [
        ConfigError([Issue("p.yaml", 3, 5, ("receivers",), "duplicate key")]),
        config("v2"),
    ]

    def load_next() -> AgentConfig:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    agent = Agent(load_next, core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    while agent.service is None:
        await asyncio.sleep(0.01)
    started = _reload_series(agent)
    assert started["otelgpu_config_reload_failures_total"] == 0  # present from the start
    assert started["otelgpu_config_last_reload_successful"] == 1
    assert started["otelgpu_config_last_reload_success_timestamp_seconds"] > 0
    agent.request_reload()
    while _reload_series(agent)["otelgpu_config_reload_failures_total"] != 1:
        await asyncio.sleep(0.01)
    assert _reload_series(agent)["otelgpu_config_last_reload_successful"] == 0
    kept = agent.service
    agent.request_reload()
    while agent.service is kept:
        await asyncio.sleep(0.01)
    after = _reload_series(agent)
    assert after["otelgpu_config_last_reload_successful"] == 1
    assert after["otelgpu_config_reload_failures_total"] == 1
    agent.request_stop()
    await running


async def test_a_stop_during_a_load_that_never_returns_still_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reload whose files never finish loading (a hung mount): SIGTERM must still stop the
    agent, and the stuck thread must not hold its exit."""
    loading = threading.Event()
    release = threading.Event()

    def stuck_load() -> AgentConfig:
        loading.set()
        release.wait(60)
        return config("never")

    agent = Agent(stuck_load, core_registry())
    running = asyncio.create_task(agent.run(config("v1")))
    try:
        while agent.service is None:
            await asyncio.sleep(0.01)
        kept = agent.service
        with caplog.at_level(logging.WARNING, logger="otelgpu"):
            logging.getLogger("otelgpu").addHandler(caplog.handler)
            agent.request_reload()
            while not loading.is_set():
                await asyncio.sleep(0.01)
            agent.request_stop()
            # 30 s guards against the defect (a stop that waits for the load), no timing
            done, _ = await asyncio.wait([running], timeout=30)
            logging.getLogger("otelgpu").removeHandler(caplog.handler)
        assert done, "the agent did not stop while a reload was loading"
        await running
        assert agent.service is None and kept.config.components == config("v1").components
        assert any("the reload is abandoned" in r.getMessage() for r in caplog.records)
        stuck = [t for t in threading.enumerate() if t.name == "otelgpu reload"]
        assert stuck and all(t.daemon for t in stuck)  # never joined at exit
    finally:
        release.set()
