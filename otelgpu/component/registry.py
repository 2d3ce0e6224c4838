"""The explicit factory registry: which component types exist, and how to create them.

Built-in factories are registered as `LazyFactory` entries (kind, type and the module that
holds the factory): the registry knows every type without importing any component, and a
component's module is imported the first time its factory is asked for. A pipeline that names
four components pays, in memory and start-up time, for those four only.
"""

from __future__ import annotations

import builtins
import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from otelgpu.component.component import Component, Kind, Stability
from otelgpu.pdata.naming import NamingTable


@dataclass(frozen=True, kw_only=True)
class Factory:
    """How to build one component type.

    `config_type` is a pydantic model whose field defaults are the default config.
    `create` is `(settings, config, next)` for receivers and `(settings, config)` for the
    other kinds; it must do no I/O (work begins in `start`). `naming`: a receiver's metrics
    in other tools' names (`otelgpu.pdata.naming`), handed to the components of a config that
    uses the receiver (`Settings.naming`).
    """

    type: str
    kind: Kind
    stability: Stability
    config_type: builtins.type[BaseModel]
    create: Callable[..., Component]
    description: str = ""
    naming: NamingTable | None = None


@dataclass(frozen=True)
class LazyFactory:
    """Where a factory lives: `module.attribute` is imported when the factory is first used.

    `kind` and `type` are repeated here so the registry can list and check types without the
    import; `load` verifies that the imported factory agrees.
    """

    kind: Kind
    type: str
    module: str
    attribute: str = "factory"

    def load(self) -> Factory:
        """Imports the module and returns its factory."""
        found = getattr(importlib.import_module(self.module), self.attribute, None)
        if not isinstance(found, Factory) or (found.kind, found.type) != (self.kind, self.type):
            raise TypeError(
                f"{self.module}.{self.attribute} is not the {self.kind.value} factory "
                f'"{self.type}" (found {found!r})'
            )
        return found


class Registry:
    """Factories indexed by kind and type; built once from an explicit list.

    Lazy entries are replaced by their factory on first use (the registry is the one
    place that remembers a loaded factory; there is no import-time registration).
    """

    def __init__(self, factories: Iterable[Factory | LazyFactory]) -> None:
        self._factories: dict[tuple[Kind, str], Factory | LazyFactory] = {}
        for factory in factories:
            key = (factory.kind, factory.type)
            if key in self._factories:
                raise ValueError(f'duplicate {factory.kind.value} factory "{factory.type}"')
            self._factories[key] = factory

    def get(self, kind: Kind, type_: str) -> Factory:
        """The factory for `type_` (its module imported now if it was not yet); KeyError
        naming the valid types when there is none."""
        key = (kind, type_)
        entry = self._factories.get(key)
        if entry is None:
            valid = ", ".join(self.types(kind)) or "none"
            raise KeyError(f'unknown {kind.value} type "{type_}" (valid: {valid})')
        if isinstance(entry, LazyFactory):
            entry = self._factories[key] = entry.load()
        return entry

    def types(self, kind: Kind) -> list[str]:
        """The registered types of one kind, sorted (nothing is imported)."""
        return sorted(t for k, t in self._factories if k is kind)

    def loaded(self) -> list[tuple[Kind, str]]:
        """The (kind, type) of every factory whose module has been imported, sorted."""
        return sorted(
            (k for k, f in self._factories.items() if isinstance(f, Factory)),
            key=lambda k: (k[0].value, k[1]),
        )

    def __iter__(self) -> Iterator[Factory]:
        """Every factory, sorted by kind and type; this loads them all (`components` lists
        stability and description, which live with each factory)."""
        keys = sorted(self._factories, key=lambda k: (k[0].value, k[1]))
        return iter([self.get(kind, type_) for kind, type_ in keys])

    def __len__(self) -> int:
        return len(self._factories)
