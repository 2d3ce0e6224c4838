"""P3's import figures: the module lists read off `-X importtime`, the imports census (each
module's own cost and who imported it), and the environment the agent is measured under."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench import p3_imports, p3_rss
from tests.unit.core.fresh_interpreter import without_site_env

ROOT = Path(__file__).resolve().parents[3]

LOG = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:        80 |        200 | io
import time:        40 |         40 |       html.entities
import time:        30 |         70 |     html
import time:        20 |         90 |   otelgpu.a
import time:        10 |        100 | otelgpu.b
2026-01-01T00:00:00Z INFO    otelgpu.cli: starting
import time:        50 |         50 |   json.scanner
import time:        60 |        110 | json
import time:         5 |          5 | __main__
"""


def test_imported_modules_all_in_order_or_only_the_roots() -> None:
    assert p3_imports.imported_modules(LOG) == [
        "_io", "io", "html.entities", "html", "otelgpu.a", "otelgpu.b", "json.scanner", "json"
    ]  # fmt: skip
    # The roots: what no other module imported, at start or later, in the program's order.
    assert p3_imports.imported_modules(LOG, roots=True) == ["io", "otelgpu.b", "json"]


def test_the_census_counts_each_module_once_by_its_own_cost_and_names_its_importer() -> None:
    env = without_site_env()
    rows = p3_imports.census([sys.executable, "-S"], ["html", "ipaddress"], ROOT, env)
    by = {module: (traced, importer) for module, traced, _, importer in rows}
    assert by["html"][1] == by["ipaddress"][1] == ""  # the roots
    assert by["html.entities"][1] == "html"
    # html.entities' tables are its own, not html's: each module holds what its body made.
    assert by["html.entities"][0] > 100_000 > by["html"][0]
    assert len(rows) == len(by)


def test_the_figures_are_of_modules_imported_as_the_agents_entry_point_imports_them() -> None:
    """The agent loads no pydantic plugins (otelgpu/entry.py): the census and the breakdown
    start the same way, so a pydantic model costs them no `importlib.metadata` either."""
    env = without_site_env()
    rows = p3_imports.census([sys.executable, "-S"], ["otelgpu.config.types"], ROOT, env)
    modules = {module for module, _, _, _ in rows}
    assert "pydantic.main" in modules  # (models were built)
    assert "importlib.metadata" not in modules
    groups = [("pydantic", ["pydantic"]), ("models", ["otelgpu.config.types"])]
    out = p3_imports._run(
        [sys.executable, "-S"], p3_imports._BREAKDOWN + _MODULES, groups, ROOT, env
    )
    assert "importlib.metadata" not in out.split()


_MODULES = "print('\\n'.join(sys.modules))\n"


def test_the_agent_runs_with_the_images_environment(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM base AS build\n"
        "ENV PIP_NO_CACHE_DIR=1\n"
        "FROM base\n"
        "ENV PATH=/opt/x/bin:$PATH \\\n"
        "    PYTHONUNBUFFERED=1\n"
        "# allocator\n"
        'ENV MALLOC_ARENA_MAX=2 \\\n    GRPC_DNS_RESOLVER="native"\n'
    )
    assert p3_rss.image_env(tmp_path) == {
        "PYTHONUNBUFFERED": "1",
        "MALLOC_ARENA_MAX": "2",
        "GRPC_DNS_RESOLVER": "native",
    }  # the final stage's, PATH apart; not the build stage's


def test_the_benchs_environment_is_the_dockerfiles() -> None:
    env, chosen = p3_rss.agent_env(site_hooks=False)
    assert chosen == p3_rss.image_env()
    assert {k: env[k] for k in chosen} == chosen
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
