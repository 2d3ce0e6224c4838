"""The device → holder snapshot: built off the hot path, read by `process` with dict lookups.

A holder is one container. Each container's devices belong to that container only. Within
a pod, a device listed by several containers is the kubelet reusing an init container's
device for the app container that follows it (the kubelet lists init containers first):
the last container listing it holds it. Across pods, every pod listing a device (or a
replica of it) holds it, and the device is marked as shared.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otelgpu import semconv
from otelgpu.model import Attributes
from otelgpu.processors.k8s_attributes.devices import Key, parse_device_id
from otelgpu.processors.k8s_attributes.pod_resources import DeviceAllocation, PodAllocation


@dataclass(frozen=True, slots=True, order=True)
class Holder:
    """A container that holds a device."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the kubelet said at one refresh, indexed for `process`.

    `labels[key]` holds one attribute set per holder of the device (in holder order),
    with the sharing attributes already in place. `known` is every key the kubelet can
    allocate (None when it does not serve `GetAllocatableResources`). `forms` counts the
    device-ID forms seen, for the log.
    """

    holders: Mapping[Key, tuple[Holder, ...]]
    labels: Mapping[Key, tuple[Attributes, ...]]
    known: frozenset[Key] | None
    forms: Mapping[str, int] = field(default_factory=dict)
    pods: int = 0

    def lookup(self, keys: Iterable[Key]) -> tuple[Key, tuple[Attributes, ...]] | None:
        """The first key with holders, and their attribute sets."""
        for key in keys:
            labels = self.labels.get(key)
            if labels:
                return key, labels
        return None

    def is_known(self, keys: Iterable[Key]) -> bool:
        """Whether the kubelet knows the device (allocated or not); True if it cannot say."""
        if self.known is None:
            return True
        return any(key in self.known for key in keys)


class ResourceFilter:
    """Which extended resources are GPUs: the config's `resource_names` globs."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self._patterns = tuple(patterns)
        self._seen: dict[str, bool] = {}

    def __call__(self, resource_name: str) -> bool:
        hit = self._seen.get(resource_name)
        if hit is None:
            hit = any(fnmatch.fnmatchcase(resource_name, p) for p in self._patterns)
            if len(self._seen) < 1024:  # resource names are few; bound the memo anyway
                self._seen[resource_name] = hit
        return hit


def build_snapshot(
    pods: Iterable[PodAllocation],
    allocatable: Iterable[DeviceAllocation] | None,
    *,
    wanted: ResourceFilter,
    id_type: str,
    node_name: str = "",
) -> Snapshot:
    """Indexes one `List` (and `GetAllocatableResources`) answer."""
    holders: dict[Key, dict[Holder, None]] = {}
    replicated: set[Key] = set()
    forms: dict[str, int] = {}
    n_pods = 0
    for pod in pods:
        n_pods += 1
        for key, holder, replica in _pod_devices(pod, wanted, id_type, forms):
            holders.setdefault(key, {})[holder] = None
            if replica:
                replicated.add(key)
    known = None if allocatable is None else frozenset(_keys(allocatable, wanted, id_type))
    by_key = {key: tuple(sorted(hs)) for key, hs in holders.items()}
    labels = {
        key: holder_labels(hs, shared=key in replicated or len(hs) > 1, node_name=node_name)
        for key, hs in by_key.items()
    }
    return Snapshot(by_key, labels, known, forms, n_pods)


def _pod_devices(
    pod: PodAllocation, wanted: ResourceFilter, id_type: str, forms: dict[str, int]
) -> list[tuple[Key, Holder, bool]]:
    owner: dict[str, tuple[Key, Holder, bool]] = {}
    for container in pod.containers:
        holder = Holder(pod.namespace, pod.name, container.name)
        for devices in container.devices:
            if not wanted(devices.resource_name):
                continue
            for device_id in devices.device_ids:
                ref = parse_device_id(device_id, id_type)
                if ref is None:
                    continue
                forms[ref.form] = forms.get(ref.form, 0) + 1
                if ref.replica:
                    forms["replica"] = forms.get("replica", 0) + 1
                # Later containers win: an app container reusing its init container's device.
                owner[device_id] = (ref.key, holder, ref.replica)
    return list(owner.values())


def _keys(devices: Iterable[DeviceAllocation], wanted: ResourceFilter, id_type: str) -> set[Key]:
    keys: set[Key] = set()
    for group in devices:
        if wanted(group.resource_name):
            for device_id in group.device_ids:
                ref = parse_device_id(device_id, id_type)
                if ref is not None:
                    keys.add(ref.key)
    return keys


def holder_labels(
    holders: tuple[Holder, ...], *, shared: bool, node_name: str
) -> tuple[Attributes, ...]:
    """One attribute set per holder; the sharing attributes when the device is shared."""
    out: list[Attributes] = []
    for h in holders:
        attrs: dict[str, str | int | float | bool] = {
            semconv.K8S_NAMESPACE_NAME: h.namespace,
            semconv.K8S_POD_NAME: h.pod,
            semconv.K8S_CONTAINER_NAME: h.container,
        }
        if node_name:
            attrs[semconv.K8S_NODE_NAME] = node_name
        if shared:
            attrs[semconv.GPU_SHARED] = True
            attrs[semconv.GPU_HOLDERS] = len(holders)
        out.append(attrs)
    return tuple(out)


def describe_forms(forms: Mapping[str, int]) -> str:
    """`gpu-uuid=4, replica=4`: the log line's summary of the forms seen."""
    return ", ".join(f"{form}={n}" for form, n in sorted(forms.items())) or "none"
