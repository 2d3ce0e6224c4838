"""The agent loads no pydantic plugins.

At its first model, pydantic asks its plugin loader (`pydantic.plugin._loader`) for plugins.
That module imports `importlib.metadata` as it loads (with `email`, `zipfile`, `csv` and
`calendar`: 1.2 MiB resident, P3), and then reads the entry points of every installed
distribution, running the code of any that names itself a pydantic plugin.
`PYDANTIC_DISABLE_PLUGINS` stops the reading, not the import. The agent validates its
pipeline file with pydantic and runs no other distribution's code in the process that carries
the node's labels, so the entry point puts a loader that finds no plugins in the place of
pydantic's, before pydantic is imported (`leave_out`).

Only `get_plugins` is taken from that module by pydantic (`pydantic.plugin._schema_validator`,
pydantic 2.x). A pydantic that took more from it would fail at the agent's first model, with an
ImportError that names what it took: the agent-process tests start the agent this way.
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from types import ModuleType

LOADER = "pydantic.plugin._loader"


def leave_out(modules: MutableMapping[str, ModuleType] | None = None) -> None:
    """Puts a plugin loader that finds none in `modules` (the process's, by default), unless
    pydantic's own is loaded already (pydantic asked for plugins before: left as it is)."""
    modules = sys.modules if modules is None else modules
    if LOADER in modules:
        return
    loader = ModuleType(LOADER, "The agent's pydantic plugin loader: no plugins.")
    loader.get_plugins = no_plugins  # type: ignore[attr-defined]
    modules[LOADER] = loader


def no_plugins() -> tuple[()]:
    """The plugins pydantic runs in the agent: none."""
    return ()
