"""Attribute actions shared by the `attributes` (point) and `resource` processors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import model_validator

from otelgpu.config.types import StrictModel
from otelgpu.pdata.model import Attributes, AttrValue


class AttributeAction(StrictModel):
    """One action on an attribute set, applied in list order.

    - `insert`: set `key` to `value` only if the key is absent.
    - `update`: set it only if present.
    - `upsert`: set it either way.
    - `delete`: remove `key`.
    - `rename`: move the value of `key` to `new_key` (unless `new_key` is already set).
    """

    key: str
    action: Literal["insert", "update", "upsert", "delete", "rename"]
    value: AttrValue | None = None
    new_key: str | None = None

    @model_validator(mode="after")
    def _check_arguments(self) -> AttributeAction:
        needs_value = self.action in ("insert", "update", "upsert")
        if needs_value and self.value is None:
            raise ValueError(f'action "{self.action}" needs a "value"')
        if not needs_value and self.value is not None:
            raise ValueError(f'action "{self.action}" takes no "value"')
        if (self.action == "rename") != (self.new_key is not None):
            raise ValueError('"new_key" goes with action "rename", and only with it')
        return self


def apply_actions(attributes: Attributes, actions: Sequence[AttributeAction]) -> Attributes:
    """Returns the attributes after every action; the input is never modified."""
    out = dict(attributes)
    for act in actions:
        present = act.key in out
        if act.action == "delete":
            out.pop(act.key, None)
        elif act.action == "rename":
            if present and act.new_key is not None and act.new_key not in out:
                out[act.new_key] = out.pop(act.key)
        elif act.value is not None and (
            act.action == "upsert" or (act.action == "insert") != present
        ):
            out[act.key] = act.value
    return out
