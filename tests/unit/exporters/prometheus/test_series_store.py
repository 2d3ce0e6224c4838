"""The series store's bookkeeping (series.py): owners, the losses each identity's lines count (a
replay plan trusts its lines while they do not move), set replacement, an emptied identity and
expiry."""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import Family, Ledger, SeriesStore


def batch(store: SeriesStore, *writes: tuple[int, str], now: float = 1.0) -> Family:
    """One batch: each (identity, prefix) written in family `f`; committed."""
    store.begin(now)
    family = store.family("f", "gauge", "h")
    assert family is not None
    for identity, prefix in writes:
        family.write(identity, prefix, "1\n", store.batch)
    store.commit()
    return family


def test_the_ledger_counts_every_loss() -> None:
    ledger = Ledger()
    ledger.lost(3)
    ledger.lost(3)
    assert ledger.losses == {3: 2}


def test_a_line_belongs_to_the_identity_that_wrote_it_last() -> None:
    store = SeriesStore()
    family = batch(store, (1, "a "), (1, "b "))
    assert (family.owner("a "), family.owner("x ")) == (1, None)
    assert family.owns(1, "a ") is True and family.owns(2, "a ") is False
    assert (store.losses(1), store.losses(2)) == (0, 0)
    batch(store, (1, "a "), (2, "b "))  # 2 claims b: 1 lost it
    assert (family.owner("b "), store.losses(1), store.losses(2)) == (2, 1, 0)


def test_lines_not_written_again_leave_and_count_as_lost() -> None:
    store = SeriesStore()
    family = batch(store, (1, "a "), (1, "b "))
    family = batch(store, (1, "a "))
    assert list(family.series) == ["a "]
    assert (store.replaced, store.losses(1)) == (1, 1)
    batch(store, (1, "a "))  # the same set again: nothing lost
    assert store.losses(1) == 1


def test_an_emptied_identity_keeps_no_line() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), (1, "b "), (2, "c "))
    store.begin(2.0)
    store.empty(1)
    store.commit()
    assert list(store.families["f"].series) == ["c "]
    assert store.losses(1) == 1


def test_expiry_counts_the_owner_s_loss() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), now=1.0)
    batch(store, (2, "b "), now=10.0)
    assert store.expire(now=12.0, max_age=5.0) == 1
    assert (store.losses(1), store.losses(2)) == (1, 0)


def test_forgotten_identities_take_their_loss_counts_along() -> None:
    store = SeriesStore()
    gone, kept = store.identities.key("gone"), store.identities.key("kept")
    batch(store, (gone, "a "), (kept, "b "))
    batch(store, (kept, "a "), (gone, "c "), (gone, "b "))  # each loses one line
    assert store.ledger.losses == {gone: 1, kept: 1}
    store.rotate()
    store.identities.key("kept")
    store.rotate()  # "gone" unseen for a whole generation
    assert store.ledger.losses == {kept: 1}


def test_a_line_s_stamp_is_the_batch_that_last_wrote_it() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), (1, "b "))
    family = batch(store, (1, "a "), (1, "b "), (2, "c "))
    batch(store, (1, "a "), (1, "b "), (2, "c "))
    assert (family.stamp("a "), family.stamp("x ")) == (2, None)
    assert family.owned() == {1: ["a ", "b "], 2: ["c "]}


def test_the_lines_kept_by_a_replacement_are_replaced_with_the_set_next_time() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), (1, "b "), (1, "c "))
    batch(store, (1, "a "), (1, "b "))  # c leaves; a and b stay the identity's set
    family = batch(store, (1, "a "))  # b leaves too
    assert list(family.series) == ["a "]
    assert store.replaced == 2


def test_a_family_nothing_was_written_to_is_dropped_at_commit() -> None:
    store = SeriesStore()
    store.begin(1.0)
    assert store.family("f", "gauge", "h") is not None
    store.commit()
    assert store.families == {}


def test_a_family_nothing_was_written_to_replaces_no_line() -> None:
    store = SeriesStore()
    batch(store, (1, "a "))
    store.begin(2.0)
    assert store.family("g", "gauge", "h") is not None  # made, nothing written
    store.commit()
    assert store.replaced == 0


def test_a_commit_leaves_the_next_batch_no_touched_family() -> None:
    store = SeriesStore()
    batch(store, (1, "a "))
    store.begin(2.0)
    assert store.family("g", "gauge", "h") is not None  # made and dropped at commit
    store.commit()
    # a dropped family stays unreferenced, and the next commit settles only what its batch touched
    assert store.ledger.touched == {}


def test_an_emptied_identity_that_reports_again_keeps_its_lines_until_they_expire() -> None:
    store = SeriesStore()
    batch(store, (1, "a "))
    store.begin(2.0)
    store.empty(1)
    store.commit()
    batch(store, (1, "b "), now=3.0)  # back, with another line
    family = batch(store, (2, "c "), now=4.0)  # 1 silent: its line stays until expiry
    assert sorted(family.series) == ["b ", "c "]


def test_batches_are_numbered_upwards_from_0() -> None:
    store = SeriesStore()
    assert store.batch == 0
    batch(store, (1, "a "), now=1.0)
    batch(store, (1, "a "), now=2.0)
    assert (store.batch, store.times) == (2, {0: 1.0, 1: 2.0})


def test_a_series_exactly_max_age_old_is_kept() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), now=1.0)
    assert store.expire(now=6.0, max_age=5.0) == 0
    assert store.expire(now=6.5, max_age=5.0) == 1


def test_the_series_count_is_every_family_s_lines() -> None:
    store = SeriesStore()
    batch(store, (1, "a "), (2, "b "))
    store.begin(2.0)
    other = store.family("g", "counter", "h")
    assert other is not None
    other.write(1, "x ", "1\n", store.batch)
    store.commit()
    assert store.series_count() == 3
