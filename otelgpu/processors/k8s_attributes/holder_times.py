"""Since when the kubelet lists each holder on each device, and each pod as it does now.

The notes k8s_attributes leaves for container_env (`notes.HOLDER_SINCE`, `HOLDERS_CHANGED`,
on the agent's clock) are worked out here at each installed answer, off the hot path: `process`
reads them per device key with one lookup each.
"""

from __future__ import annotations

from otelgpu.processors.k8s_attributes.devices import Key
from otelgpu.processors.k8s_attributes.pod_resources import PodAllocation
from otelgpu.processors.k8s_attributes.snapshot import Holder, Snapshot

PodName = tuple[str, str]  # (namespace, name)


class HolderTimes:
    """Per device key, its holders' times in the allocation's order."""

    def __init__(self) -> None:
        # (device key, holder) → since when the kubelet lists it (-inf: its first answer did);
        # and per key, its holders' in the allocation's order (`notes.HOLDER_SINCE`)
        self._since: dict[tuple[Key, Holder], float] = {}
        self._since_by_key: dict[Key, tuple[float, ...]] = {}
        # per pod name, what the kubelet lists for it and since when (`notes.HOLDERS_CHANGED`;
        # -inf: the first answer installed since the start listed it so); per key, its holders'
        # in the allocation's order
        self._listings: dict[PodName, frozenset[PodAllocation]] = {}
        self._listed_since: dict[PodName, float] = {}
        self._changed_by_key: dict[Key, tuple[float, ...]] = {}
        self._answered = False  # whether an answer was installed since the start

    def of(self, key: Key) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Since when each holder of the device `key` is listed on it, and since when the
        kubelet lists each holder's pod as it does now (empty for a key with no holders)."""
        return self._since_by_key.get(key, ()), self._changed_by_key.get(key, ())

    def installed(self, snapshot: Snapshot, pods: tuple[PodAllocation, ...], now: float) -> None:
        """Notes since when each (device, holder) is listed, and since when the kubelet lists
        each holder's pod as it does now: new in this answer, since `now` (-inf for the answer
        to the first request after a start: the runtime is listed afresh at start too).

        What the first answer installed since the start lists for a pod is noted as listed
        since always (-inf), whenever that answer came: an answer that came only after failures
        says nothing of how long the kubelet had listed it (its pairs keep `now`, the latest
        they can be new: a runtime listing older than that may predate them)."""
        self._pods_since(pods, now if self._answered else float("-inf"))
        self._answered = True
        since: dict[tuple[Key, Holder], float] = {}
        by_key: dict[Key, tuple[float, ...]] = {}
        changed_by_key: dict[Key, tuple[float, ...]] = {}
        listed = self._listed_since
        for key, holders in snapshot.holders.items():
            times = []
            for holder in holders:
                when = since[(key, holder)] = self._since.get((key, holder), now)
                times.append(when)
            by_key[key] = tuple(times)
            changed_by_key[key] = tuple(listed.get((h.namespace, h.pod), now) for h in holders)
        self._since, self._since_by_key = since, by_key
        self._changed_by_key = changed_by_key

    def _pods_since(self, pods: tuple[PodAllocation, ...], now: float) -> None:
        """Since when the kubelet lists each pod name as it does now (`notes.HOLDERS_CHANGED`):
        it names pods, not pod uids, so a pod recreated under its name is told from the old
        one only by what the kubelet lists for the name changing (or going)."""
        by_name: dict[PodName, set[PodAllocation]] = {}
        for pod in pods:
            by_name.setdefault((pod.namespace, pod.name), set()).add(pod)
        listings = {name: frozenset(found) for name, found in by_name.items()}
        self._listed_since = {
            name: self._listed_since[name] if self._listings.get(name) == listing else now
            for name, listing in listings.items()
        }
        self._listings = listings
