"""Configuration of the `filter` processor: our globs, or the contrib processor's name form.

The contrib `filter` processor has the same type name. Its metric-name form
(`include: {match_type: strict|regexp, metric_names: [...]}`) means the same thing as ours and
is accepted; its OTTL (`metric`, `datapoint`, `error_mode`) and `expr` forms, and matching on
resource attributes, are refused with a message that says what to write instead.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from otelgpu.config.types import StrictModel

_OTTL_KEYS = ("metric", "datapoint")
_OTTL_MESSAGE = (
    "OTTL conditions ({keys}) are the contrib filter processor's; otelgpu's filter matches "
    "metric names only: use include/exclude with globs, or the contrib form "
    "{{match_type: strict|regexp, metric_names: [...]}}"
)


class MatchProperties(StrictModel):
    """The contrib processor's `{match_type, metric_names}` (strict: equal names; regexp: the
    pattern is found anywhere in the name, as Go's `MatchString` does)."""

    match_type: Literal["strict", "regexp"]
    metric_names: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("match_type") == "expr" or "expressions" in data:
                raise ValueError(
                    "match_type expr (expressions) is not supported: match metric names with "
                    "strict, regexp or globs"
                )
            if "resource_attributes" in data:
                raise ValueError(
                    "resource_attributes is not supported by otelgpu's filter (it matches metric "
                    "names only); drop the key or filter after export"
                )
        return data

    @field_validator("metric_names")
    @classmethod
    def _compiles(cls, names: list[str], info: Any) -> list[str]:
        if info.data.get("match_type") == "regexp":
            for name in names:
                try:
                    re.compile(name)
                except re.error as exc:
                    raise ValueError(f'invalid regular expression "{name}": {exc}') from None
        return names

    def matches(self, name: str) -> bool:
        if self.match_type == "strict":
            return name in self.metric_names
        return any(re.search(p, name) for p in self.metric_names)


# A mapping is the contrib form, anything else must be a list of globs. (Tags starting with
# "~" are left out of error paths by config/messages.py.)
NameMatch = Annotated[
    Annotated[list[str], Tag("~globs")] | Annotated[MatchProperties, Tag("~contrib")],
    Discriminator(lambda v: "~contrib" if isinstance(v, (dict, MatchProperties)) else "~globs"),
]


class MetricNameFilter(StrictModel):
    """Metric name globs (or the contrib form). An empty `include` keeps every metric
    `exclude` does not drop."""

    include: NameMatch = Field(default_factory=list)
    exclude: NameMatch = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _ottl(cls, data: Any) -> Any:
        if isinstance(data, dict) and (keys := [k for k in _OTTL_KEYS if k in data]):
            raise ValueError(_OTTL_MESSAGE.format(keys=", ".join(f"metrics::{k}" for k in keys)))
        return data

    def included(self, name: str) -> bool:
        if isinstance(self.include, MatchProperties):
            return self.include.matches(name)
        return not self.include or _any_glob(name, self.include)

    def excluded(self, name: str) -> bool:
        if isinstance(self.exclude, MatchProperties):
            return self.exclude.matches(name)
        return _any_glob(name, self.exclude)


class FilterProcessorConfig(StrictModel):
    """`processors::filter`: `metrics: {include: [...], exclude: [...]}`."""

    metrics: MetricNameFilter = Field(default_factory=MetricNameFilter)

    @model_validator(mode="before")
    @classmethod
    def _contrib_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and "error_mode" in data:
            raise ValueError(_OTTL_MESSAGE.format(keys="error_mode"))
        return data


def _any_glob(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
