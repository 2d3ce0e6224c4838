"""The device → holder snapshot: built off the hot path, read by `process` with dict lookups.

A holder is one container. Each container's devices belong to that container only. Within
a pod, a device listed by several containers is the kubelet reusing an init container's
device for the app container that follows it (the kubelet lists init containers first):
the last container listing it holds it. Across pods, every pod listing a device (or a
replica of it) holds it.

Each device's `Allocation` is worked out here, off the hot path: the labels of the device's own
series (its holder's when it has exactly one; none of any holder's when several share it) and
one allocation label set per holder, with that holder's share (1/N) and replica IDs.

DRA claim devices (`dynamic_resources`) are holders by the same rules as device-plugin
devices; each holder remembers which path gave it the device (`device_plugin` or `dra`) and,
for DRA, the claims it came through: its allocation label set names them
(`nvidia.gpu.resourceclaim.name` / `.namespace`; several claims of one holder sorted and joined
with `,`), the device's own series do not (they keep the holder's namespace, pod, container).

The snapshot does not depend on the order of the pods (a kubelet lists them in a new order on
most calls): holders, replica IDs and every mapping are sorted.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes, AttrValue
from otelgpu.processors.k8s_attributes.devices import (
    DRA_OTHER_POOL,
    Key,
    parse_device_id,
    parse_dra_device,
)
from otelgpu.processors.k8s_attributes.pod_resources import (
    ClaimDevice,
    DeviceAllocation,
    PodAllocation,
)

DEVICE_PLUGIN = "device_plugin"  # the allocation path: a device plugin's device IDs
DRA = "dra"  # a DRA resource claim's device
Claim = tuple[str, str]  # a DRA ResourceClaim: (namespace, name)
_NO_CLAIMS: frozenset[Claim] = frozenset()


@dataclass(frozen=True, slots=True, order=True)
class Holder:
    """A container that holds a device."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class Allocation:
    """Who holds one device, as `process` needs it.

    `device`: the attributes of the device's own series. `holders`: one (attributes, share)
    per holder for its `nvidia.gpu.allocation` series. `members`: the holders as
    (namespace, pod, container), for checking a process against the allocation. `sources`:
    each holder's allocation path (`device_plugin` or `dra`), in the order of `holders`.
    """

    device: Attributes
    holders: tuple[tuple[Attributes, float], ...]
    members: frozenset[tuple[str, str, str]]
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the kubelet said at one refresh, indexed for `process`.

    `allocations[key]` is the allocation of the device with that key. `known` is every key
    the kubelet can allocate (None when it does not serve `GetAllocatableResources`).
    `forms` counts the device-ID forms seen, for the log. `dra_keys`: the keys of NVIDIA DRA
    claim devices; `dra_unmapped`: NVIDIA DRA claim devices that name no GPU, by reason.
    """

    holders: Mapping[Key, tuple[Holder, ...]]
    allocations: Mapping[Key, Allocation]
    known: frozenset[Key] | None
    forms: Mapping[str, int] = field(default_factory=dict)
    pods: int = 0
    dra_keys: frozenset[Key] = frozenset()
    dra_unmapped: Mapping[str, int] = field(default_factory=dict)

    def lookup(self, keys: Iterable[Key]) -> Allocation | None:
        """The allocation of the first key that has holders."""
        found = self.lookup_key(keys)
        return found[1] if found is not None else None

    def lookup_key(self, keys: Iterable[Key]) -> tuple[Key, Allocation] | None:
        """The first key that has holders, and its allocation."""
        for key in keys:
            found = self.allocations.get(key)
            if found is not None:
                return key, found
        return None

    def is_known(self, keys: Iterable[Key]) -> bool:
        """Whether the kubelet knows the device (allocated or not); True if it cannot say."""
        if self.known is None:
            return True
        return any(key in self.known for key in keys)

    def knows(self, keys: Iterable[Key]) -> bool:
        """Whether the kubelet said it can allocate the device (False when it cannot say)."""
        return self.known is not None and any(key in self.known for key in keys)


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
    holders: dict[Key, dict[Holder, set[str]]] = {}
    sources: dict[tuple[Key, Holder], str] = {}
    claims: dict[tuple[Key, Holder], set[Claim]] = {}
    forms: dict[str, int] = {}
    unmapped: dict[str, int] = {}
    n_pods = 0
    dra = _Dra(node_name, unmapped)
    for pod in pods:
        n_pods += 1
        found = _pod_devices(pod, wanted, id_type, forms, dra)
        for key, holder, replica, source, via in found:
            replicas = holders.setdefault(key, {}).setdefault(holder, set())
            if replica:
                replicas.add(replica)
            if via:
                claims.setdefault((key, holder), set()).update(via)
            # A holder given one device by both paths (a misconfigured node) shows as DRA.
            if sources.get((key, holder)) != DRA:
                sources[(key, holder)] = source
    known = None if allocatable is None else frozenset(_keys(allocatable, wanted, id_type))
    # Sorted keys and counts: the same pods in any order give an identical snapshot, down to
    # the order its mappings iterate in (holders are sorted within each device too).
    by_key = {key: tuple(sorted(holders[key])) for key in sorted(holders)}
    allocations = {key: allocation(holders[key], node_name, sources, key, claims) for key in by_key}
    dra_keys = frozenset(k for (k, _), source in sources.items() if source == DRA)
    counts = dict(sorted(forms.items())), dict(sorted(unmapped.items()))
    return Snapshot(by_key, allocations, known, counts[0], n_pods, dra_keys, counts[1])


def allocation(
    holders: Mapping[Holder, set[str]],
    node_name: str,
    sources: Mapping[tuple[Key, Holder], str] | None = None,
    key: Key = (),
    claims: Mapping[tuple[Key, Holder], Iterable[Claim]] | None = None,
) -> Allocation:
    """A device's `Allocation` from its holders, each one's replica IDs and (by (key,
    holder)) the path that allocated it (`device_plugin` when not given) and the DRA claims it
    came through (named on the holder's allocation labels only, never on the device's)."""
    ordered = sorted(holders)
    shared = len(ordered) > 1
    node = {semconv.K8S_NODE_NAME: node_name} if node_name else {}
    sharing: dict[str, AttrValue] = (
        {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: len(ordered)} if shared else {}
    )
    share = 1.0 / len(ordered)
    per_holder = []
    device: Attributes = {**node, **sharing}
    for holder, attrs in zip(
        ordered, holder_labels(tuple(ordered), node_name=node_name), strict=True
    ):
        replicas = ",".join(sorted(holders[holder], key=_replica_order))
        extra = {semconv.GPU_REPLICA: replicas} if replicas else {}
        labels = {**attrs, **sharing, **extra}
        if not shared:
            device = labels  # the one holder's labels, less its claims
        via = (claims or {}).get((key, holder))
        per_holder.append(({**labels, **claim_labels(via)} if via else labels, share))
    members = frozenset((h.namespace, h.pod, h.container) for h in ordered)
    paths = tuple((sources or {}).get((key, h), DEVICE_PLUGIN) for h in ordered)
    return Allocation(device, tuple(per_holder), members, paths)


def _replica_order(replica: str) -> tuple[int, str]:
    return (int(replica), "") if replica.isdigit() else (0, replica)


def claim_labels(claims: Iterable[Claim]) -> Attributes:
    """The claim attributes of one holder: the names (and namespaces) of the claims it holds the
    device through, sorted and joined with `,` (one namespace in practice: a pod's claims are
    in its own namespace). Empty parts are left out."""
    found = set(claims)
    names = ",".join(sorted({name for _, name in found if name}))
    namespaces = ",".join(sorted({namespace for namespace, _ in found if namespace}))
    out: dict[str, AttrValue] = {}
    if names:
        out[semconv.GPU_RESOURCECLAIM_NAME] = names
    if namespaces:
        out[semconv.GPU_RESOURCECLAIM_NAMESPACE] = namespaces
    return out


@dataclass(slots=True)
class _Dra:
    """What reading DRA claim devices needs: this node's pool name ("" = unknown, any pool
    accepted) and the count of NVIDIA claim devices that name no GPU, by reason."""

    node_name: str
    unmapped: dict[str, int]

    def key(self, claim: ClaimDevice, forms: dict[str, int]) -> Key | None:
        key, form = parse_dra_device(claim.driver, claim.device, claim.cdi_devices)
        if key is not None and self.node_name and claim.pool and claim.pool != self.node_name:
            key, form = None, DRA_OTHER_POOL
        if key is None:
            if form:  # NVIDIA's device that names no GPU here (another driver's: not ours)
                self.unmapped[form] = self.unmapped.get(form, 0) + 1
            return None
        forms[form] = forms.get(form, 0) + 1
        return key


def _pod_devices(
    pod: PodAllocation,
    wanted: ResourceFilter,
    id_type: str,
    forms: dict[str, int],
    dra: _Dra,
) -> list[tuple[Key, Holder, str, str, frozenset[Claim]]]:
    """(key, holder, replica ID, path, DRA claims) of every device the pod's containers hold."""
    owner: dict[str, tuple[Key, Holder, str, str, frozenset[Claim]]] = {}
    for container in pod.containers:
        if not (container.claims or container.devices):
            continue  # most containers of a busy node hold nothing: cheap to pass over
        holder = Holder(pod.namespace, pod.name, container.name)
        for claim in container.claims:
            key = dra.key(claim, forms)
            if key is not None:
                # Same rule as device IDs: a later container listing the device holds it,
                # through its own claims; one container listing it through several claims
                # holds it through all of them.
                slot = "\0".join(("dra", *key, claim.share_id))
                prior = owner.get(slot)
                via = prior[4] if prior is not None and prior[1] == holder else _NO_CLAIMS
                named = (claim.claim_namespace, claim.claim_name)
                owner[slot] = (key, holder, "", DRA, via | {named} if claim.claim_name else via)
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
                replica = ref.replica_id if ref.replica else ""
                owner[device_id] = (ref.key, holder, replica, DEVICE_PLUGIN, _NO_CLAIMS)
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


def holder_labels(holders: tuple[Holder, ...], *, node_name: str) -> tuple[Attributes, ...]:
    """One attribute set per holder: its namespace, pod, container (and the node)."""
    out: list[Attributes] = []
    for h in holders:
        attrs: dict[str, AttrValue] = {
            semconv.K8S_NAMESPACE_NAME: h.namespace,
            semconv.K8S_POD_NAME: h.pod,
            semconv.K8S_CONTAINER_NAME: h.container,
        }
        if node_name:
            attrs[semconv.K8S_NODE_NAME] = node_name
        out.append(attrs)
    return tuple(out)


def describe_forms(forms: Mapping[str, int]) -> str:
    """`gpu-uuid=4, replica=4`: the log line's summary of the forms seen."""
    return ", ".join(f"{form}={n}" for form, n in sorted(forms.items())) or "none"
