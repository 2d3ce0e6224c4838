"""What the runtime listed, and when: the times a match by name is checked against.

k8s_attributes notes since when the kubelet lists a holder on a device, since when it lists the
holder's pod as it does now, and when it last answered (`notes.HOLDER_SINCE`,
`HOLDERS_CHANGED`, `HOLDERS_CONFIRMED`, on the agent's clock). A pod deleted and created again
under its name is the same (namespace, pod, container) to the kubelet, whose answer can lag
the runtime: these times say whether the container a name matches now is the one the kubelet
meant. `ListingHistory` keeps, per runtime listing, what those checks compare with (on the same
clock): when the listing behind the snapshot began, when each container was first listed, and
which pod uids each name was listed under, from when to when.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.snapshot import Match, Snapshot, WorkloadKey

_NAMES_MAX = 4096  # names whose pod uids are remembered (bounds memory if names churn)
_UIDS_PER_NAME = 4  # pod uids remembered per (namespace, pod, container)


class ListingHistory:
    """The runtime's listings over time, as the stale-holder checks need them."""

    def __init__(self) -> None:
        # when the listing behind the current snapshot began (`newer_than_snapshot`), and
        # when each container the snapshot matches by name was first listed (`unconfirmed`)
        self._listed_from = float("-inf")
        self._appeared: dict[str, float] = {}  # container ID → when first listed
        # per (namespace, pod, container): each pod uid listed under it → [when the listing
        # that first showed it began, when the last listing that showed it began]; per
        # container: when the last complete listing before the one that first showed it began
        # (`held_by_other_uid`)
        self._uids_of_name: dict[WorkloadKey, dict[str, list[float]]] = {}
        self._unseen_at: dict[str, float] = {}

    def listed(self, snapshot: Snapshot, started: float, *, complete: bool) -> None:
        """A listing that began at `started` gave `snapshot`; `complete` when every runtime
        answered it (only then is it the snapshot's, and says which containers are new)."""
        listed_before = self._appeared
        self._appeared = {cid: self._appeared.get(cid, started) for cid in snapshot.by_id}
        self._note_uids(snapshot, listed_before, previous=self._listed_from, seen=started)
        if complete:  # the snapshot is this listing's only when every runtime answered
            self._listed_from = started

    def _note_uids(
        self, snapshot: Snapshot, listed_before: Collection[str], previous: float, seen: float
    ) -> None:
        """Notes which pod uids each (namespace, pod, container) is listed under, from when
        to when (the start of the first and of the last listing that showed one of its
        running containers: any listing that shows it says it ran then), and for each
        container listed for the first time the start of the last complete listing before
        (`previous`)."""
        # name → uid → when the listing that first showed one of its containers began
        listed: dict[WorkloadKey, dict[str, float]] = {}
        unseen_at: dict[str, float] = {}
        for cid, match in snapshot.by_id.items():
            unseen_at[cid] = self._unseen_at[cid] if cid in listed_before else previous
            name = workload(match)
            if all(name) and match.pod_uid:
                uids = listed.setdefault(name, {})
                uids[match.pod_uid] = min(uids.get(match.pod_uid, math.inf), self._appeared[cid])
        self._unseen_at = unseen_at
        for name, uids in listed.items():
            if name not in self._uids_of_name and len(self._uids_of_name) >= _NAMES_MAX:
                self._uids_of_name.clear()  # bounds memory if names churn
            known = self._uids_of_name.setdefault(name, {})
            for uid, first in uids.items():
                interval = known.setdefault(uid, [first, seen])
                interval[1] = max(interval[1], seen)
            while len(known) > _UIDS_PER_NAME:  # the oldest go first
                del known[min(known, key=lambda uid: known[uid][0])]

    def newer_than_snapshot(self, rm: ResourceMetrics) -> float | None:
        """Since when the resource's holder is listed, when that is newer than the runtime
        listing behind the snapshot (else None).

        A pod deleted and created again under its name is the same (namespace, pod, container)
        to the kubelet, and a listing older than the new pod may still hold the old pod's
        running container, whose labels must not be lent to the new one. k8s_attributes notes
        since when the kubelet lists this container on this device (`notes.HOLDER_SINCE`): a
        name is matched only with a listing that began after that and that every runtime
        answered (the next refresh, asked for at once); its labels are absent for that long,
        never borrowed. Names without the note (no k8s_attributes before this processor) are
        matched at once."""
        since = rm.notes.get(notes.HOLDER_SINCE) if rm.notes else None
        return since if isinstance(since, float) and since > self._listed_from else None

    def unconfirmed(self, rm: ResourceMetrics, match: Match) -> bool:
        """Whether the runtime first listed the container matched by name after the kubelet
        last answered (`notes.HOLDERS_CONFIRMED`): it may be a new pod under the name of a
        deleted one that the kubelet, slow or down, still says holds this device. Its labels
        wait for a kubelet answer given after it appeared."""
        confirmed = rm.notes.get(notes.HOLDERS_CONFIRMED) if rm.notes else None
        if not isinstance(confirmed, float):
            return False
        appeared = self._appeared.get(match.container_id)
        return appeared is not None and appeared > confirmed

    def held_by_other_uid(self, rm: ResourceMetrics, match: Match) -> bool:
        """Whether the kubelet's (device, name) pair belongs to another pod uid than that of
        the container matched by name (`notes.HOLDER_SINCE`, `notes.HOLDERS_CHANGED`).

        The kubelet names pods, not pod uids, and its answer can lag the runtime: a pod
        deleted and created again under its name (a StatefulSet's pod) on another GPU can
        still be listed on the old pod's GPU. A pair listed since before (or when) the last
        listing that showed an older pod uid's container under the name began belongs to that
        older uid: the newer container's labels wait until what the kubelet lists for the pod
        changes after the newer container may have started (the start of the last complete
        listing without it), or the pair goes. A pair first listed after that listing is the
        newer one's: the kubelet never gives a running container other devices, so a pair it
        lists only once the older container had stopped running comes from the newer pod,
        however long that pod takes to start its container (an image pull) and however late
        the runtime's next listing shows the older one gone."""
        since = rm.notes.get(notes.HOLDER_SINCE) if rm.notes else None
        changed = rm.notes.get(notes.HOLDERS_CHANGED) if rm.notes else None
        if not (isinstance(since, float) and isinstance(changed, float)) or not match.pod_uid:
            return False
        if changed == -math.inf:
            # What the kubelet lists for the pod is as its first answer since k8s_attributes
            # started listed it, so the pair may have been listed for any time before that
            # answer (one that came after failures notes the pair since it came).
            since = -math.inf
        cid = match.container_id
        if not cid or changed > self._unseen_at.get(cid, float("inf")):
            return False
        uids = self._uids_of_name.get(workload(match), {})
        mine = uids.get(match.pod_uid)
        if mine is None:
            return False
        return any(
            first < mine[0] and since <= last
            for uid, (first, last) in uids.items()
            if uid != match.pod_uid
        )


def workload(match: Match) -> WorkloadKey:
    """The (namespace, pod, container) the runtime's labels give a match."""
    identity = match.identity
    return (
        identity.get(semconv.K8S_NAMESPACE_NAME, ""),
        identity.get(semconv.K8S_POD_NAME, ""),
        identity.get(semconv.K8S_CONTAINER_NAME, ""),
    )
