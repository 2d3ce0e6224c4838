"""The pods the kubelet's pod-resources API lists that its stats summary misses.

The summary lists a pod only when cAdvisor (or the CRI) has stats for its containers: when it
has none (a cgroup driver mismatch, a cAdvisor failure, a runtime it cannot read), the pod is
left out without a word, and its CPU and memory series are simply absent. Where a
`k8s_attributes` processor in the same agent asks the pod-resources socket, it posts what the
kubelet lists (`otelgpu.component.pod_listing`), and each successful summary read is checked
against every pod listed there (every pod the kubelet runs, with or without a GPU):

- `not_in_summary`: listed, and the summary has no entry of that namespace and name (a pod
  started seconds before may miss one read; the silent gap misses read after read);
- `no_stats_yet`: the summary names it, but none of its entries gave a series (judged only when
  a pod-level group, `pod`, `container` or `volume`, is enabled).

Counted in `otelgpu_kubelet_missed_pods_total{receiver,reason}` per judged read (a pod missed
on every read adds one each time), each pod logged once while pod-resources lists it (one
line per read and reason names the first five and counts the rest).

A read is judged only against pods listed by an answer before it began and by every answer
up to one to a request sent after it ended: a pod created or deleted while it ran is not
counted. Such an answer comes within `k8s_attributes`' `refresh_interval`, so a read is judged
at a later scrape; reads not judged by then (the source down, no answer yet) are dropped,
never counted. Without a listing (no `k8s_attributes` in the agent, its source down, or
pipelines reading different sockets) nothing is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from otelgpu.component.component import Settings
from otelgpu.component.pod_listing import PodListings, PodName, ReadMark

MISSED_PODS = "otelgpu_kubelet_missed_pods_total"
NOT_IN_SUMMARY = "not_in_summary"
NO_STATS_YET = "no_stats_yet"
LOGGED_NAMES = 5  # pods named in one log line; the rest are counted
PENDING_MAX = 4  # reads awaiting an answer after them; older ones are dropped, not counted
_MEANS = {
    NOT_IN_SUMMARY: "the kubelet summary has no entry for it, so it has no CPU, memory, "
    "network or filesystem series (cAdvisor has no stats for its containers; on kubelets "
    "before 1.32, also a completed pod not yet deleted)",
    NO_STATS_YET: "the kubelet summary names it without any stats, so it has no series "
    "(normal for a few seconds after it starts)",
}


@dataclass(frozen=True, slots=True)
class _Read:
    mark: ReadMark
    pods: Mapping[PodName, bool]  # the summary's pods → whether they gave series


class MissedPods:
    """Checks summary reads against the pod listing; counts and logs the pods they miss."""

    def __init__(self, settings: Settings, *, judges_stats: bool) -> None:
        self._settings = settings
        self._listings: PodListings | None = settings.pod_listings
        self._judges_stats = judges_stats
        self._receiver = str(settings.id)
        self._pending: list[_Read] = []
        self._logged: set[tuple[PodName, str]] = set()

    def began(self) -> ReadMark | None:
        """Noted as a read begins (None: no listing to check against)."""
        return self._listings.began() if self._listings is not None else None

    def ended(self, mark: ReadMark | None, pods: Mapping[PodName, bool]) -> None:
        """A successful read that began at `mark` named `pods`: judged once pod-resources
        answers a request sent after now."""
        if mark is None or self._listings is None:
            return
        self._pending.append(_Read(self._listings.ended(mark), pods))
        del self._pending[:-PENDING_MAX]
        self.judge()

    def judge(self) -> None:
        """Counts the misses of every pending read that the listing can judge now."""
        if self._listings is None:
            return
        waiting = []
        for read in self._pending:
            if self._listings.lost(read.mark):
                continue  # the source failed (or changed) since it began: never judged
            listed = self._listings.listed_throughout(read.mark)
            if listed is None:
                waiting.append(read)
            else:
                self._count(listed, read.pods)
        self._pending = waiting

    def _count(self, listed: frozenset[PodName], pods: Mapping[PodName, bool]) -> None:
        # Set operations rather than a Python loop over every listed pod: this runs on the loop
        missed = [(pod, NOT_IN_SUMMARY) for pod in listed - pods.keys()]
        if self._judges_stats:
            empty = (pod for pod, has_series in pods.items() if not has_series)
            missed += [(pod, NO_STATS_YET) for pod in empty if pod in listed]
        counts = {NOT_IN_SUMMARY: 0, NO_STATS_YET: 0}
        new: dict[str, list[PodName]] = {NOT_IN_SUMMARY: [], NO_STATS_YET: []}
        for pod, reason in sorted(missed):
            counts[reason] += 1
            if (pod, reason) not in self._logged:
                self._logged.add((pod, reason))
                new[reason].append(pod)
        for reason, n in counts.items():
            self._settings.telemetry.count(MISSED_PODS, n, receiver=self._receiver, reason=reason)
            if new[reason]:
                self._log(new[reason], reason)
        if self._logged:  # remembered while listed: memory stays bounded by the node's pods
            self._logged = {(pod, reason) for pod, reason in self._logged if pod in listed}

    def _log(self, pods: list[PodName], reason: str) -> None:
        """One line per read and reason for the pods not logged before: a node-wide failure
        misses every pod, and names a few of them with the count."""
        level = logging.INFO if reason == NO_STATS_YET else logging.WARNING
        named = ", ".join(f"{ns}/{name}" for ns, name in pods[:LOGGED_NAMES])
        more = f" and {len(pods) - LOGGED_NAMES} more" if len(pods) > LOGGED_NAMES else ""
        self._settings.logger.log(
            level,
            "%d pods the kubelet's pod-resources API lists, the summary misses (%s): %s%s: %s "
            "(each pod logged once while listed)",
            len(pods),
            reason,
            named,
            more,
            _MEANS[reason],
        )
