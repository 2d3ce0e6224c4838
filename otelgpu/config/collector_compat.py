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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.registry import Factory, Registry

_log = logging.getLogger("otelgpu.config")


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
    write when the type is unknown."""
    message = CONTRIB_ONLY.get((kind, cid.type))
    if message is not None:
        raise KeyError(f'{kind.value} type "{cid.type}" {message}')
    return registry.get(kind, resolve(kind, cid.type))


def warn_deprecated(kind: Kind, cid: ComponentID) -> None:
    """One warning line for a deprecated alias, naming the spelling to use instead."""
    alias = ALIASES.get((kind, cid.type))
    if alias is not None and alias.deprecated:
        _log.warning(
            '%s "%s": "%s" is a deprecated alias (as in the Collector); use "%s" instead',
            kind.value,
            cid,
            cid.type,
            alias.type,
        )
