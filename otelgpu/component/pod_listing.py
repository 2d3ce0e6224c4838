"""What the kubelet's pod-resources API lists, shared by the component that asks it with the
components that check their own view of the node against it.

`k8s_attributes` asks the kubelet's pod-resources socket which pods run on the node; the
`kubelet_stats` receiver reads the kubelet's stats summary, which silently leaves out a pod
whose containers cAdvisor has no stats for. Neither reaches into the other: the service hands
one `PodListings` to every component (`Settings.pod_listings`), the processor posts each answer
here, and the receiver asks which pods were listed throughout its own read.

Answers are ordered by tickets, not by a clock: a ticket is taken when a request is sent, so
"an answer to a request sent after the read ended" needs no clock shared between components.
A pod counts as listed throughout a read only when one answer before the read began and every
answer since, up to one asked for after the read ended, list it (by namespace and name): a pod
created or deleted during the read is never taken for one the read missed. A failed request
forgets everything posted under its source (the listing is no longer known), and answers from
more than one source (two pipelines' `k8s_attributes` reading different sockets) give no
listing at all: which of them is this node's kubelet cannot be told.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

PodName = tuple[str, str]  # (namespace, name): pod-resources names pods, not pod uids


@dataclass(frozen=True, slots=True)
class ReadMark:
    """Where a reader's read stands against the listing: the source, the ticket of the last
    answer posted when the read began (0: none), and the last ticket taken when it ended."""

    source: str
    answered_before: int
    asked_by_end: int
    failures: int = 0  # the source's failures when the read began


@dataclass(slots=True)
class _Source:
    tickets: int = 0  # the last ticket taken
    answered: int = 0  # the ticket of the answer installed (0: none since the last failure)
    since: dict[PodName, int] = field(default_factory=dict)  # pod → first answer of its run
    pods: frozenset[PodName] = frozenset()  # what the installed answer listed
    newest: int = 0  # the latest start of a run among them (most reads began after it)
    failures: int = 0  # requests failed so far: a read that spans one is never judged


class PodListings:
    """The pods each pod-resources source last listed, and since which answer without a gap.
    The service owns one per start; its components share it through their Settings."""

    def __init__(self) -> None:
        self._sources: dict[str, _Source] = {}

    # --- the component that asks the kubelet ----------------------------------------------

    def asking(self, source: str) -> int:
        """The ticket of a request about to be sent to `source` (its socket path)."""
        entry = self._sources.setdefault(source, _Source())
        entry.tickets += 1
        return entry.tickets

    def answered(self, source: str, ticket: int, pods: Iterable[PodName]) -> None:
        """The answer to request `ticket`: the pods it lists. An answer to an older request
        than the one installed (two pipelines asking the same socket) is left out."""
        entry = self._sources.setdefault(source, _Source())
        if ticket <= entry.answered:
            return
        listed = frozenset(pods)
        # The same pods (most answers: the poster hands on the same set): every run goes on.
        if entry.answered == 0 or (listed is not entry.pods and listed != entry.pods):
            since = entry.since
            entry.since = {pod: since.get(pod, ticket) for pod in listed}
            entry.pods, entry.newest = listed, max(entry.since.values(), default=0)
        entry.answered = ticket

    def failed(self, source: str) -> None:
        """A request to `source` failed: what it lists is no longer known, and a pod listed
        after the failure starts a new run."""
        entry = self._sources.get(source)
        if entry is not None:
            entry.since, entry.answered, entry.pods, entry.newest = {}, 0, frozenset(), 0
            entry.failures += 1

    # --- the components that check against it --------------------------------------------

    def began(self) -> ReadMark | None:
        """Noted when a read begins; None when there is no listing to check against (no
        source, more than one, or none that answered since its last failure)."""
        entry = self._only()
        if entry is None or entry[1].answered == 0:
            return None
        source, state = entry
        return ReadMark(source, state.answered, 0, state.failures)

    def ended(self, mark: ReadMark) -> ReadMark:
        """`mark` with the tickets taken by the time the read ended."""
        state = self._sources.get(mark.source)
        tickets = state.tickets if state else 0
        return ReadMark(mark.source, mark.answered_before, tickets, mark.failures)

    def lost(self, mark: ReadMark) -> bool:
        """Whether what was listed throughout the read begun at `mark` can no longer be known
        (its source failed since, or is no longer the only one): the read is never judged."""
        entry = self._only()
        return entry is None or entry[0] != mark.source or entry[1].failures != mark.failures

    def listed_throughout(self, mark: ReadMark) -> frozenset[PodName] | None:
        """The pods listed by an answer before the read began and by every answer since, up
        to one to a request sent after it ended; None while no such answer has come (or the
        listing was lost since: the read is never judged then)."""
        if self.lost(mark):
            return None
        state = self._sources[mark.source]
        if state.answered <= mark.asked_by_end:
            return None
        if state.newest <= mark.answered_before:  # every run began before the read
            return state.pods
        return frozenset(pod for pod, first in state.since.items() if first <= mark.answered_before)

    def _only(self) -> tuple[str, _Source] | None:
        if len(self._sources) != 1:
            return None
        return next(iter(self._sources.items()))
