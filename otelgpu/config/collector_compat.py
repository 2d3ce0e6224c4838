"""The Collector's names for our components, mapped before the registry is asked.

A pipeline file written for `otelcol` should read the same here. The Collector renamed its
OTLP exporters (`otlp` → `otlp_grpc`, `otlphttp` → `otlp_http`, v0.144) and keeps the old
names as deprecated aliases; both spellings work here, as does contrib's `kubeletstats` for our
`kubelet_stats` (with a warning). The component ID keeps the name as
written (`otlphttp/backend` stays `otlphttp/backend` in logs and self-metrics), only the
factory lookup goes through this table.

Contrib components that share a purpose but not a schema with ours get a clear error instead of
"unknown type" (see `CONTRIB_ONLY`); a contrib `k8s_attributes` block (the same name as ours)
gets one error naming its options (processors/k8s_attributes/config.py); docs/configuration.md
"Collector users" says why.

Collector processors that have nothing to do here (`batch`, `memory_limiter`) are accepted as
no-ops with a warning (`NO_OP_PROCESSORS`), and Collector options of our components that the
agent does not take get an answer of their own (`COLLECTOR_KEYS`): dropped with a warning where
ignoring them changes nothing a user relies on, refused with what to write instead otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.registry import Factory, Registry
from otelgpu.config.suggest import did_you_mean


@dataclass(frozen=True)
class Alias:
    """Another name for a registered type; `deprecated` ones log one warning per load."""

    type: str
    deprecated: bool = False


ALIASES: dict[tuple[Kind, str], Alias] = {
    (Kind.EXPORTER, "otlp_grpc"): Alias("otlp"),
    (Kind.EXPORTER, "otlphttp"): Alias("otlp_http", deprecated=True),
    # contrib's receiver is `kubeletstats`; ours writes it as the Collector now spells names
    (Kind.RECEIVER, "kubeletstats"): Alias("kubelet_stats", deprecated=True),
}

# Contrib component types whose options cannot be honoured here, with what to use instead.
CONTRIB_ONLY: dict[tuple[Kind, str], str] = {
    (Kind.PROCESSOR, "k8sattributes"): (
        "is the contrib k8sattributes processor (pod metadata from the API server, matched by "
        'pod IP), which otelgpu does not ship: GPU series are labelled by "k8s_attributes" '
        "(one underscore), which asks the kubelet's pod-resources socket which pod holds each "
        "GPU and takes other options (pod_resources_socket, refresh_interval, resource_names, "
        "device_id_type, node_name); see docs/configuration.md"
    ),
}


def resolve(kind: Kind, type_: str) -> str:
    """The registered type that `type_` names (itself when it is no alias)."""
    alias = ALIASES.get((kind, type_))
    return alias.type if alias else type_


def factory_for(registry: Registry, kind: Kind, cid: ComponentID) -> Factory:
    """The factory of `cid`, through the aliases; KeyError with a message that says what to
    write when the type is unknown (with the nearest valid type when one is near)."""
    message = CONTRIB_ONLY.get((kind, cid.type))
    if message is not None:
        raise KeyError(f'{kind.value} type "{cid.type}" {message}')
    try:
        return registry.get(kind, resolve(kind, cid.type))
    except KeyError:
        valid = registry.types(kind)
        hint = did_you_mean(cid.type, [*valid, *(t for k, t in ALIASES if k is kind)])
        raise KeyError(
            f'unknown {kind.value} type "{cid.type}"{hint} (valid: {", ".join(valid)})'
        ) from None


def deprecation(kind: Kind, cid: ComponentID) -> str | None:
    """The warning for a deprecated alias, naming the spelling to use instead (None when `cid`
    is written as it should be)."""
    alias = ALIASES.get((kind, cid.type))
    if alias is None or not alias.deprecated:
        return None
    return f'"{cid.type}" is a deprecated alias (as in the Collector); use "{alias.type}" instead'


# Collector processors with nothing to do in this agent: accepted, their options ignored, left
# out of the pipeline, with this warning.
NO_OP_PROCESSORS: dict[str, str] = {
    "batch": (
        "the Collector's batch processor is a no-op here and is left out of the pipeline: each "
        "collection already reaches the exporters as one batch, and the OTLP exporter sends it "
        "as one request"
    ),
    "memory_limiter": (
        "the Collector's memory_limiter is a no-op here and is left out of the pipeline: the "
        "agent bounds its own memory (the OTLP sending queue's queue_size, bounded caches); "
        "size the container's memory limit instead (docs/deploy.md, Resources)"
    ),
}


@dataclass(frozen=True)
class CollectorKey:
    """A Collector option of one of our components that the agent does not take.

    `path` is inside the component's options; `*` stands for each item of a list. With
    `value`, only that value of the option is meant (`action: hash`). `harmless` says for which
    values ignoring the option changes nothing a user relies on: those are dropped with
    `answer` as a warning; other values are refused with `answer` as the error. Either way the
    option leaves the options, so it gets no second, generic error; a refused option inside a
    list item takes the item with it, replaced by `stand_in` (an item that validates), so the
    other items keep their index and their own errors their position.
    """

    kind: Kind
    type: str
    path: tuple[str, ...]
    answer: str
    value: Any = None
    harmless: Callable[[Any], bool] = lambda value: False
    stand_in: Any = None


_ACTION_STAND_IN = {"key": "_", "action": "delete"}

COLLECTOR_KEYS: tuple[CollectorKey, ...] = (
    CollectorKey(
        Kind.PROCESSOR,
        "attributes",
        ("actions", "*", "from_attribute"),
        "from_attribute (copying another attribute's value) is not supported: value takes a "
        "literal; to move an attribute to a new name use action: rename with new_key",
        stand_in=_ACTION_STAND_IN,
    ),
    CollectorKey(
        Kind.PROCESSOR,
        "attributes",
        ("actions", "*", "action"),
        'action "hash" is not supported: remove the attribute with action: delete, or keep '
        "it from being collected (container_env's include lists name what leaves the node)",
        value="hash",
        stand_in=_ACTION_STAND_IN,
    ),
    CollectorKey(
        Kind.PROCESSOR,
        "attributes",
        ("actions", "*", "action"),
        'action "convert" (with converted_type) is not supported: attribute values keep the '
        "type they were read with; set a value of the type you need with action: upsert",
        value="convert",
        stand_in=_ACTION_STAND_IN,
    ),
    CollectorKey(
        Kind.EXPORTER,
        "prometheus",
        ("enable_open_metrics",),
        "enable_open_metrics has no effect here: OpenMetrics is served whenever the scraper "
        "asks for it (Prometheus does), classic text otherwise (docs/prometheus.md)",
        harmless=lambda value: True,
    ),
    CollectorKey(
        Kind.EXPORTER,
        "prometheus",
        ("add_metric_suffixes",),
        "add_metric_suffixes: metric names always carry their unit and _total suffixes, as "
        "the Collector's default (true) does; false is not supported (naming: dcgm serves "
        "dcgm-exporter's names, which have none)",
        harmless=lambda value: value is True,
    ),
    CollectorKey(
        Kind.EXPORTER,
        "otlp",
        ("compression",),
        'compression "zstd" is not supported on OTLP/gRPC here: use gzip (the default) or none',
        value="zstd",
    ),
    CollectorKey(
        Kind.EXPORTER,
        "otlp_http",
        ("compression",),
        'compression "zstd" is not supported on OTLP/HTTP here: use gzip (the default) or none',
        value="zstd",
    ),
    *(
        CollectorKey(
            Kind.EXPORTER,
            exporter,
            ("sending_queue", "block_on_overflow"),
            "block_on_overflow has no effect here: a collection never waits for a full queue; "
            "what does not fit is dropped and counted in otelgpu_exporter_failed_points_total "
            "(raise sending_queue::queue_size to hold more)",
            harmless=lambda value: True,
        )
        for exporter in ("otlp", "otlp_http")
    ),
)


@dataclass(frozen=True)
class Finding:
    """A Collector option met in a component's options: where (inside the options), what to
    say, and whether it was refused (an error) or dropped (a warning)."""

    path: tuple[Any, ...]
    answer: str
    refused: bool


def collector_keys(kind: Kind, type_: str, options: Any) -> tuple[Any, list[Finding]]:
    """`options` without the Collector options it holds that the agent does not take, and what
    to say about each (`COLLECTOR_KEYS`). The options given are not changed."""
    findings: list[Finding] = []
    changes: list[tuple[tuple[Any, ...], Any]] = []  # (path, stand-in or _REMOVED)
    for entry in COLLECTOR_KEYS:
        if (entry.kind, entry.type) != (kind, type_):
            continue
        for path, value in _matches(options, entry.path, ()):
            if entry.value is not None and value != entry.value:
                continue
            refused = not entry.harmless(value)
            findings.append(Finding(path, entry.answer, refused))
            item = next((n for n in range(len(path) - 1, 0, -1) if isinstance(path[n], int)), None)
            if refused and item is not None:
                changes.append((path[: item + 1], entry.stand_in))
            else:
                changes.append((path, _REMOVED))
    if not changes:
        return options, findings
    kept = copy.deepcopy(options)
    # Longest paths first: a key inside an item is gone before the item is replaced.
    for path, replacement in sorted(changes, key=lambda change: -len(change[0])):
        _apply(kept, path, replacement)
    return kept, findings


def _matches(node: Any, pattern: tuple[str, ...], at: tuple[Any, ...]) -> Iterator[Any]:
    """(path, value) of each option the pattern names in `node`."""
    if not pattern:
        yield at, node
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*" and isinstance(node, list):
        for n, item in enumerate(node):
            yield from _matches(item, rest, (*at, n))
    elif isinstance(node, dict) and head in node:
        yield from _matches(node[head], rest, (*at, head))


_REMOVED = object()


def _apply(node: Any, path: tuple[Any, ...], replacement: Any) -> None:
    """Removes the option at `path` (a dict key), or puts `replacement` in place of a list
    item."""
    for part in path[:-1]:
        node = node[part]
    if isinstance(node, list):
        node[path[-1]] = copy.deepcopy(replacement)
    elif isinstance(node, dict):
        node.pop(path[-1], None)
