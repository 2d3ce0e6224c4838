"""A real Prometheus scrapes the agent's kubelet series and a cAdvisor endpoint, whose
`container_memory_working_set_bytes` and `container_memory_usage_bytes` have the same names.

The cAdvisor endpoint is a plain HTTP server answering the text exposition format with the
series and label set the kubelet's `/metrics/cadvisor` gives them (`container`, `id`, `image`,
`name`, `namespace`, `pod`). The queries checked are read from docs/kubelet_stats.md ("Beside
cAdvisor"), so the documented recipe cannot drift from what Prometheus answers.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.integration.test_kubelet_stats import k8s_node_agent, kubelet
from tests.peers.ports import free_port
from tests.peers.prometheus import PrometheusServer, Result, Scrape

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubelet_stats.md"
AGENT_JOB, CADVISOR_JOB = "otelgpu", "kubelet"
NAMES = ("container_memory_working_set_bytes", "container_memory_usage_bytes")

_POD = 'namespace="ml",pod="trainer-0"'
_CGROUP = "/kubepods/burstable/pod6f1e2d3c"
# cAdvisor's series: the pod's two containers, the pod's own cgroup (container="") and the
# root cgroup (id="/", no pod). Values differ from the kubelet stand-in's.
CADVISOR_SERIES = {
    f'container="trainer",id="{_CGROUP}/c1",image="trainer:1",name="c1",{_POD}': 5e9,
    f'container="log-shipper",id="{_CGROUP}/c2",image="shipper:2",name="c2",{_POD}': 3e8,
    f'container="",id="{_CGROUP}",image="",name="",{_POD}': 5.4e9,
    'container="",id="/",image="",name="",namespace="",pod=""': 9e9,
}


def cadvisor_body() -> str:
    lines = []
    for name in NAMES:
        lines += [f"# HELP {name} cAdvisor's.", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{labels}}} {value:.0f}" for labels, value in CADVISOR_SERIES.items()]
    return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def cadvisor() -> AsyncIterator[str]:
    """Serves `cadvisor_body()` at /metrics; yields host:port."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=cadvisor_body(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def recipe() -> list[tuple[str, str]]:
    """(job whose series the query must select, query), from the doc's promql block."""
    text = DOC.read_text()
    block = text.split("## Beside cAdvisor", 1)[1].split("```promql\n", 1)[1].split("```")[0]
    queries: list[tuple[str, str]] = []
    job = ""
    for line in block.splitlines():
        if line.startswith("# The agent's"):
            job = AGENT_JOB
        elif line.startswith("# cAdvisor's"):
            job = CADVISOR_JOB
        elif line.strip():
            assert job, f"a recipe query before its source is named: {line}"
            queries.append((job, line.strip()))
    return queries


def pinned(query: str, job: str) -> str:
    """The query with its selector replaced by the job: the source's series, by construction."""
    pinned_query, n = re.subn(r"\{[^}]*\}", f'{{job="{job}"}}', query)
    assert n == 1, f"a recipe query has one selector: {query}"
    return pinned_query


def values(result: Result) -> dict[tuple[tuple[str, Any], ...], float]:
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in result}


def test_the_recipe_names_both_sources_and_both_metrics() -> None:
    queries = recipe()
    assert {job for job, _ in queries} == {AGENT_JOB, CADVISOR_JOB}
    for name in NAMES:
        assert any(name in q for _, q in queries), name


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
async def test_the_documented_queries_tell_the_agents_series_from_cadvisors(
    tmp_path: Path, naming: str
) -> None:
    async with (
        kubelet(tmp_path) as server,
        k8s_node_agent(tmp_path, server, naming) as url,
        cadvisor() as cadvisor_target,
    ):
        agent_target = url.removeprefix("http://").removesuffix("/metrics")
        prom = PrometheusServer(
            tmp_path / "prometheus",
            Scrape(target=agent_target, job=AGENT_JOB),
            Scrape(target=cadvisor_target, job=CADVISOR_JOB),
        )
        try:
            await prom.start()
            # Both jobs' series of both names are in: the agent's two containers, cAdvisor's 4.
            for name in NAMES:
                await prom.wait_for(
                    f"count by (job) ({name})",
                    lambda r: (
                        values(r) == {(("job", AGENT_JOB),): 2.0, (("job", CADVISOR_JOB),): 4.0}
                    ),
                )
            for name in NAMES:
                ours = values(await prom.query(f'sum({name}{{job="{AGENT_JOB}"}})'))
                theirs = values(await prom.query(f'sum({name}{{job="{CADVISOR_JOB}"}})'))
                assert theirs == {(): sum(CADVISOR_SERIES.values())}
                # The clash: a query pinned to neither adds both.
                both = values(await prom.query(f"sum({name})"))
                assert both == {(): ours[()] + theirs[()]}, (name, ours, theirs)
            if naming == "dcgm":  # the labels are cAdvisor's too: per pod, doubled as well
                per_pod = values(
                    await prom.query(
                        'sum by (namespace, pod) (container_memory_usage_bytes{pod="trainer-0"})'
                    )
                )
                ours_per_pod = values(
                    await prom.query(
                        f"sum by (namespace, pod) "
                        f'(container_memory_usage_bytes{{job="{AGENT_JOB}",pod="trainer-0"}})'
                    )
                )
                key = (("namespace", "ml"), ("pod", "trainer-0"))
                cadvisor_pod = sum(v for k, v in CADVISOR_SERIES.items() if "trainer-0" in k)
                assert per_pod[key] == ours_per_pod[key] + cadvisor_pod
            # Each documented query answers exactly its source's series, nothing of the other.
            for job, query in recipe():
                got = values(await prom.query(query))
                want = values(await prom.query(pinned(query, job)))
                assert got, f"{query} selects nothing under naming {naming}"
                assert got == want, (naming, query, got, want)
        finally:
            await prom.stop()
