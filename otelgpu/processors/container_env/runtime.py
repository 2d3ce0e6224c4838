"""The narrow view of a container runtime the processor needs, and the OCI spec decoder."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class RuntimeUnavailable(Exception):
    """The runtime did not answer (no socket, refused, timed out, restarting)."""


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """One container as the runtime lists it.

    `revision` changes whenever the record changes (containerd's `updated_at`; docker's
    records never change, so the ID), so extracted data is reused while it holds.
    `raw_spec` is containerd's OCI spec JSON exactly as listed: it carries every env value,
    so it is decoded once, filtered, and dropped with the listing. `annotations` are those
    the listing already shows (dockershim keeps a pod's annotations as `annotation.` labels).
    `running` says the container is alive now (containerd: its task runs; docker:
    `State.Running`); a record that is not running is never read nor matched, so a dead
    pod's container can never label anything.
    """

    id: str
    labels: Mapping[str, str]
    revision: str
    running: bool  # no default: each runtime says it, so no listing is taken as alive or dead
    created: float
    sandbox_id: str = ""
    raw_spec: bytes = b""
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """What the runtime knows beyond labels: `KEY=VALUE` env entries and annotations."""

    env: Sequence[str] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    valid: bool = True


class ContainerRuntime(Protocol):
    """A read-only client of one container runtime (containerd or docker).

    Both calls raise `RuntimeUnavailable` when the runtime does not answer; malformed data
    is never an exception (a spec that cannot be decoded comes back with `valid=False`).
    Implementations never create, change or delete anything in the runtime.
    """

    @property
    def name(self) -> str:
        """`containerd` or `docker`: the source name in self-telemetry."""

    @property
    def endpoint(self) -> str:
        """Where the runtime is reached (a socket path), for logs."""

    async def list_containers(self) -> Sequence[ContainerRef]:
        """Every container the runtime holds now, each saying whether it is running
        (docker lists running ones only)."""

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        """The annotations of one listed container, and its env when `env` is true (a
        runtime may skip a request when it is not); None when the container is gone."""

    async def close(self) -> None:
        """Releases connections; idempotent."""


def decode_oci_spec(raw: bytes) -> ContainerSpec:
    """`process.env` and `annotations` from an OCI runtime spec in JSON.

    Anything unexpected (not JSON, wrong types, non-string entries) yields what could be
    read with `valid=False`; it never raises.
    """
    try:
        spec = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ContainerSpec(valid=False)
    if not isinstance(spec, dict):
        return ContainerSpec(valid=False)
    process = spec.get("process")
    env_raw: Any = process.get("env") if isinstance(process, dict) else None
    ann_raw: Any = spec.get("annotations")
    env = [e for e in env_raw if isinstance(e, str)] if isinstance(env_raw, list) else []
    annotations = (
        {k: v for k, v in ann_raw.items() if isinstance(v, str)}
        if isinstance(ann_raw, dict)
        else {}
    )
    valid = (
        (env_raw is None or (isinstance(env_raw, list) and len(env) == len(env_raw)))
        and (process is None or isinstance(process, dict))
        and (ann_raw is None or (isinstance(ann_raw, dict) and len(annotations) == len(ann_raw)))
    )
    return ContainerSpec(env=env, annotations=annotations, valid=valid)


def env_pairs(entries: Iterable[str]) -> Iterator[tuple[str, str]]:
    """`KEY=VALUE` entries as pairs, lazily, so only selected values are ever kept.

    Entries without `=` or with an empty key are skipped (docker's bare `KEY` means "pass
    through from the client", not a value).
    """
    for entry in entries:
        key, sep, value = entry.partition("=")
        if sep and key:
            yield key, value
