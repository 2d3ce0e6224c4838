"""What the runtime's listings are remembered as, for the stale-holder checks
(`listing_history`): the bounds of each check, what is tracked under a name, and what the
memory keeps (four pod uids per name, 4096 names)."""

from __future__ import annotations

import math

import pytest

from otelgpu.pdata import notes, semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env.listing_history import ListingHistory
from otelgpu.processors.container_env.snapshot import Match, Snapshot

NAME = {
    semconv.K8S_NAMESPACE_NAME: "ml",
    semconv.K8S_POD_NAME: "train-0",
    semconv.K8S_CONTAINER_NAME: "trainer",
}


def _container(cid: str, uid: str = "", identity: dict[str, str] | None = None) -> Match:
    return Match(
        attributes={},
        identity=NAME if identity is None else identity,
        pod_uid=uid,
        container_id=cid,
    )


def _listing(*containers: Match) -> Snapshot:
    return Snapshot(by_id={m.container_id: m for m in containers})


def _pair(
    since: float, *, confirmed: float = math.inf, changed: float | None = None
) -> ResourceMetrics:
    """A GPU resource whose kubelet pair is listed since `since`, the kubelet last answered at
    `confirmed` and lists the pod as it does now since `changed` (k8s_attributes' notes; by
    default `since`: the pod's listing changed when the pair came)."""
    changed = since if changed is None else changed
    return ResourceMetrics(
        resource={},
        metrics=(),
        notes={
            notes.HOLDER_SINCE: since,
            notes.HOLDERS_CONFIRMED: confirmed,
            notes.HOLDERS_CHANGED: changed,
        },
    )


def _filler(i: int) -> Match:
    """A container of another name (pod `other-i`) with its own pod uid."""
    return _container(f"f{i}", f"uid-f{i}", {**NAME, semconv.K8S_POD_NAME: f"other-{i}"})


def test_before_any_listing_no_pair_is_held_by_another_uid() -> None:
    history = ListingHistory()
    assert history.held_by_other_uid(_pair(0.0), _container("c-b", "uid-b")) is False


def test_a_container_never_listed_is_not_held_by_another_uid() -> None:
    history = ListingHistory()
    history.listed(_listing(_container("c-a", "uid-a")), 1.0, complete=True)
    assert history.held_by_other_uid(_pair(0.5), _container("c-b", "uid-b")) is False


def test_a_pair_is_newer_than_a_listing_that_began_less_than_a_second_before_it() -> None:
    history = ListingHistory()
    history.listed(_listing(_container("c-a", "uid-a")), 10.0, complete=True)
    assert history.newer_than_snapshot(_pair(10.5)) == 10.5
    assert history.newer_than_snapshot(_pair(10.0)) is None


def test_a_container_listed_less_than_a_second_after_the_last_answer_is_unconfirmed() -> None:
    history = ListingHistory()
    history.listed(_listing(_container("c-a", "uid-a")), 10.0, complete=True)
    assert history.unconfirmed(_pair(0.0, confirmed=9.5), _container("c-a", "uid-a"))
    assert not history.unconfirmed(_pair(0.0, confirmed=10.0), _container("c-a", "uid-a"))


def test_an_older_uid_first_listed_less_than_a_second_before_is_told_apart() -> None:
    history = ListingHistory()
    old, new = _container("c-a", "uid-a"), _container("c-b", "uid-b")
    history.listed(_listing(old), 1.0, complete=True)
    history.listed(_listing(old, new), 1.5, complete=True)
    assert history.held_by_other_uid(_pair(1.2, changed=1.0), new)


def _recreated(history: ListingHistory, old: Match, new: Match) -> None:
    """`old` listed at 1, gone from the listing at 2, `new` first listed at 3."""
    history.listed(_listing(old), 1.0, complete=True)
    history.listed(_listing(), 2.0, complete=True)
    history.listed(_listing(new), 3.0, complete=True)


def test_a_pair_listed_while_the_older_uid_ran_is_the_older_uids() -> None:
    history = ListingHistory()
    new = _container("c-b", "uid-b")
    _recreated(history, _container("c-a", "uid-a"), new)
    assert history.held_by_other_uid(_pair(1.0), new)  # listed when uid-a was last listed
    # first listed after the last listing that showed uid-a running (the kubelet never gives
    # a running container other devices), or once it was gone: the new uid's
    assert not history.held_by_other_uid(_pair(1.001), new)
    assert not history.held_by_other_uid(_pair(1.5), new)
    assert not history.held_by_other_uid(_pair(2.0), new)


def test_containers_whose_pod_uid_the_runtime_does_not_say_are_not_remembered() -> None:
    history = ListingHistory()
    new = _container("c-b", "uid-b")
    _recreated(history, _container("c-a", ""), new)
    assert not history.held_by_other_uid(_pair(1.0), new)


@pytest.mark.parametrize(
    "missing",
    [semconv.K8S_NAMESPACE_NAME, semconv.K8S_POD_NAME, semconv.K8S_CONTAINER_NAME],
)
def test_containers_missing_a_part_of_their_name_are_not_remembered(missing: str) -> None:
    partial = {k: v for k, v in NAME.items() if k != missing}
    history = ListingHistory()
    new = _container("c-b", "uid-b", partial)
    _recreated(history, _container("c-a", "uid-a", partial), new)
    assert not history.held_by_other_uid(_pair(1.0), new)


def test_a_name_remembers_its_four_first_listed_pod_uids_at_most() -> None:
    """Pod uids listed one after another under one name: with a fifth, the first is forgotten."""
    history = ListingHistory()
    second = _container("c2", "uid-2")
    for t in (1, 2, 3, 4):
        history.listed(_listing(_container(f"c{t}", f"uid-{t}")), float(t), complete=True)
    assert history.held_by_other_uid(_pair(1.0), second)  # uid-1 was last listed at 1
    history.listed(_listing(_container("c5", "uid-5")), 5.0, complete=True)
    assert not history.held_by_other_uid(_pair(1.0), second)  # uid-1 forgotten


def test_the_first_listed_pod_uid_is_forgotten_first_even_while_still_listed() -> None:
    history = ListingHistory()
    first = _container("c1", "uid-1")
    for t in (1, 2, 3, 4, 5):  # uid-1 listed throughout; uid-2..5 one after another
        history.listed(_listing(first, _container(f"c{t}", f"uid-{t}")), float(t), complete=True)
    # uid-1 (first listed at 1, still listed) is forgotten, not uid-2 (listed from 2 to 3)
    assert not history.held_by_other_uid(_pair(3.5), _container("c3", "uid-3"))


def _two_listings(history: ListingHistory, names: int, *, newcomer: bool) -> Match:
    """`names` names listed at 1 (the first, train-0, under uid-a); at 2 the same names with
    train-0 under uid-b (uid-a gone), and, with `newcomer`, one name more. Returns uid-b's."""
    fillers = [_filler(i) for i in range(names - 1)]
    history.listed(_listing(_container("c-a", "uid-a"), *fillers), 1.0, complete=True)
    new = _container("c-b", "uid-b")
    more = [_filler(names)] if newcomer else []
    history.listed(_listing(new, *fillers, *more), 2.0, complete=True)
    return new


def test_the_uids_of_4096_names_are_remembered() -> None:
    history = ListingHistory()
    new = _two_listings(history, 4096, newcomer=False)
    assert history.held_by_other_uid(_pair(1.0), new)


def test_a_4097th_name_starts_the_memory_afresh() -> None:
    history = ListingHistory()
    new = _two_listings(history, 4096, newcomer=True)
    assert not history.held_by_other_uid(_pair(1.0), new)  # uid-a forgotten


def test_a_pair_whose_pod_is_listed_anew_since_the_container_may_have_started_is_its() -> None:
    """The kubelet lists the pod differently since after the last complete listing without
    the new container: the pair is the new uid's, though listed while the older one ran."""
    history = ListingHistory()
    new = _container("c-b", "uid-b")
    _recreated(history, _container("c-a", "uid-a"), new)
    assert history.held_by_other_uid(_pair(1.0, changed=2.0), new)
    assert history.held_by_other_uid(_pair(1.0, changed=2.5), new) is False


def test_without_k8s_attributes_notes_the_checks_answer_no() -> None:
    history = ListingHistory()
    new = _container("c-b", "uid-b")
    _recreated(history, _container("c-a", "uid-a"), new)
    bare = ResourceMetrics(resource={}, metrics=())
    assert history.newer_than_snapshot(bare) is None
    assert history.unconfirmed(bare, new) is False
    assert history.held_by_other_uid(bare, new) is False


def test_a_pair_of_a_pod_listed_as_in_the_kubelets_first_answer_may_be_the_older_uids() -> None:
    """k8s_attributes' first answer after a start (`changed` -inf) may have come only after
    failures, so its pairs, noted since it came, may have been listed for any time before."""
    history = ListingHistory()
    new = _container("c-b", "uid-b")
    _recreated(history, _container("c-a", "uid-a"), new)
    assert history.held_by_other_uid(_pair(5.0, changed=-math.inf), new)
    assert not history.held_by_other_uid(_pair(5.0), new)  # first listed once uid-a was gone
