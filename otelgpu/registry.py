"""The explicit factory registry: which component types exist, and how to create them."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from otelgpu.component import Component, Kind, Stability


@dataclass(frozen=True, kw_only=True)
class Factory:
    """How to build one component type.

    `config_type` is a pydantic model whose field defaults are the default config.
    `create` is `(settings, config, next)` for receivers and `(settings, config)` for the
    other kinds; it must do no I/O (work begins in `start`).
    """

    type: str
    kind: Kind
    stability: Stability
    config_type: builtins.type[BaseModel]
    create: Callable[..., Component]
    description: str = ""


class Registry:
    """Factories indexed by kind and type; built once from an explicit list."""

    def __init__(self, factories: Iterable[Factory]) -> None:
        self._factories: dict[tuple[Kind, str], Factory] = {}
        for factory in factories:
            key = (factory.kind, factory.type)
            if key in self._factories:
                raise ValueError(f'duplicate {factory.kind.value} factory "{factory.type}"')
            self._factories[key] = factory

    def get(self, kind: Kind, type_: str) -> Factory:
        """The factory for `type_`; KeyError naming the valid types when there is none."""
        try:
            return self._factories[(kind, type_)]
        except KeyError:
            valid = ", ".join(self.types(kind)) or "none"
            raise KeyError(f'unknown {kind.value} type "{type_}" (valid: {valid})') from None

    def types(self, kind: Kind) -> list[str]:
        """The registered types of one kind, sorted."""
        return sorted(t for k, t in self._factories if k is kind)

    def __iter__(self) -> Iterator[Factory]:
        return iter(sorted(self._factories.values(), key=lambda f: (f.kind.value, f.type)))

    def __len__(self) -> int:
        return len(self._factories)
