"""Series identity (SPEC "Shared GPUs and series identity"): a series belongs to its
device or process; labels processors add are properties of it. The body never holds a device
twice under two label sets, and a shared GPU's allocation series are replaced as a set. Identity
numbers (identities.py) are stable, forgotten only after a whole generation unseen, never reused."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus.identities import Identities
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu, gpu_metrics, held_by
from tests.unit.exporters.prometheus.translators import make_translator

UUID0 = gpu(0)[semconv.HW_ID]


def device(index: int, labels: dict[str, AttrValue], power: float = 300.0) -> ResourceMetrics:
    """One GPU as the nvml receiver names it (identity = UUID), with processor labels."""
    resource = gpu(index, **labels)
    return ResourceMetrics(
        resource=resource,
        metrics=(gauge("hw.power", "W", power),),
        identity=resource[semconv.HW_ID],
    )


def allocation(index: int, labels: dict[str, AttrValue], share: float) -> ResourceMetrics:
    resource = gpu(index, **labels)
    return ResourceMetrics(
        resource=resource,
        metrics=(gauge(semconv.GPU_ALLOCATION, "1", share),),
        identity=(semconv.GPU_ALLOCATION, resource[semconv.HW_ID]),
    )


def body(store: SeriesStore) -> list[str]:
    text, _ = render_text(store.families.values())
    return [line for line in text.splitlines() if not line.startswith("#")]


def ingest(translator: Translator, store: SeriesStore, batch: Batch, now: float = 1.0) -> None:
    translator.ingest(store, batch, now)


def power_lines(lines: list[str], name: str = "hw_power_watts") -> list[str]:
    return [line for line in lines if line.startswith(name + "{")]


def test_relabelled_gpu_leaves_no_ghost() -> None:
    """Case 1: an unlabelled first collection stayed for metric_expiration beside the labelled."""
    store, translator = SeriesStore(), make_translator("otel")
    ingest(translator, store, (device(0, {}),))
    ingest(translator, store, (device(0, held_by("train-0")),))
    (line,) = power_lines(body(store))
    assert 'k8s_pod_name="train-0"' in line
    assert store.replaced == 1


def test_pod_move_replaces_the_old_pod_at_once_in_dcgm_naming() -> None:
    store, translator = SeriesStore(), make_translator("dcgm")
    ingest(translator, store, (device(0, held_by("old")),))
    ingest(translator, store, (device(0, held_by("new")),), now=2.0)
    (line,) = power_lines(body(store), "DCGM_FI_DEV_POWER_USAGE")
    assert 'pod="new"' in line and 'pod="old"' not in line


def test_a_device_that_stops_reporting_still_expires() -> None:
    store, translator = SeriesStore(), make_translator("otel")
    ingest(translator, store, (device(0, {}), device(1, {})), now=1.0)
    ingest(translator, store, (device(1, {}),), now=400.0)
    assert store.expire(now=401.0, max_age=300.0) == 2  # its power and its info series
    (line,) = power_lines(body(store))
    assert f'hw_id="{gpu(1)[semconv.HW_ID]}"' in line
    family = store.families["hw_power_watts"]
    assert family.holds(store.identities.key(gpu(1)[semconv.HW_ID]))
    assert not family.holds(store.identities.key(gpu(0)[semconv.HW_ID]))  # its lines went too


def test_allocation_series_are_replaced_as_a_set() -> None:
    """Case 2/5: a holder leaving a time-sliced GPU must not leave its share behind."""
    store, translator = SeriesStore(), make_translator("otel")
    shared = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 2}
    ingest(
        translator,
        store,
        (
            device(0, shared),
            allocation(0, {**held_by("a"), **shared}, 0.5),
            allocation(0, {**held_by("b"), **shared}, 0.5),
        ),
    )
    assert len(power_lines(body(store), "nvidia_gpu_allocation_ratio")) == 2
    ingest(translator, store, (device(0, {}), allocation(0, held_by("b"), 1.0)), now=2.0)
    (line,) = power_lines(body(store), "nvidia_gpu_allocation_ratio")
    assert 'k8s_pod_name="b"' in line and line.endswith(" 1.0")
    assert len(power_lines(body(store))) == 1


def test_two_identities_that_render_alike_never_duplicate_or_delete_each_other() -> None:
    store, translator = SeriesStore(), make_translator("otel")
    same = gpu(0, **held_by("p"))
    a = ResourceMetrics(resource=same, metrics=(gauge("hw.power", "W", 1.0),), identity="a")
    b = ResourceMetrics(resource=same, metrics=(gauge("hw.power", "W", 2.0),), identity="b")
    ingest(translator, store, (a, b))
    assert power_lines(body(store)) == [power_lines(body(store))[0]]  # one line
    assert power_lines(body(store))[0].endswith(" 2.0")  # the later value wins
    # `a` relabels: its new line appears, and `b`'s line (which `a` no longer owns) stays.
    moved = ResourceMetrics(
        resource=gpu(0, **held_by("q")), metrics=(gauge("hw.power", "W", 3.0),), identity="a"
    )
    ingest(translator, store, (moved,), now=2.0)
    assert len(power_lines(body(store))) == 2


def test_without_identity_the_attributes_are_the_identity() -> None:
    """Resources no receiver named keep the old behaviour: a new label set is a new series."""
    store, translator = SeriesStore(), make_translator("otel")
    ingest(translator, store, (ResourceMetrics(resource=gpu(0), metrics=gpu_metrics()),))
    ingest(
        translator,
        store,
        (ResourceMetrics(resource=gpu(0, **held_by("p")), metrics=gpu_metrics()),),
    )
    assert len(power_lines(body(store))) == 2


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_node_sums_equal_device_sums_on_a_shared_gpu(naming: str) -> None:
    """Case 2: dcgm-exporter's dashboard summed 3554 W on a node drawing 2790 W."""
    store, translator = SeriesStore(), make_translator(naming)
    shared = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 3}
    batch: list[ResourceMetrics] = [device(0, shared, 400.0), device(1, held_by("x"), 250.0)]
    batch += [allocation(0, {**held_by(p), **shared}, 1 / 3) for p in "abc"]
    batch.append(allocation(1, held_by("x"), 1.0))
    ingest(translator, store, tuple(batch))
    name = "hw_power_watts" if naming == "otel" else "DCGM_FI_DEV_POWER_USAGE"
    total = sum(float(line.rsplit(" ", 1)[1]) for line in power_lines(body(store), name))
    assert total == 650.0


def test_per_holder_copies_a_shared_gpu_once_per_holder_with_vgpu() -> None:
    """The opt-in dcgm-exporter `--kubernetes-virtual-gpus` shape (documented as double counting)."""
    store, translator = SeriesStore(), make_translator("dcgm", shared_gpu_series="per_holder")
    shared = {semconv.GPU_SHARED: True, semconv.GPU_HOLDERS: 2}
    batch = (
        device(0, shared, 400.0),
        allocation(0, {**held_by("a"), **shared, semconv.GPU_REPLICA: "0"}, 0.5),
        allocation(0, {**held_by("b"), **shared, semconv.GPU_REPLICA: "1"}, 0.5),
        device(1, held_by("x"), 250.0),
        allocation(1, held_by("x"), 1.0),
    )
    ingest(translator, store, batch)
    lines = power_lines(body(store), "DCGM_FI_DEV_POWER_USAGE")
    copies = sorted(line for line in lines if UUID0 in line)
    assert len(copies) == 2
    assert 'pod="a"' in copies[0] and 'vgpu="0"' in copies[0]
    assert 'pod="b"' in copies[1] and 'vgpu="1"' in copies[1]
    assert len(lines) == 3  # the exclusive GPU is not copied
    # A holder leaves: its copy goes at once.
    ingest(translator, store, batch[:2] + batch[3:], now=2.0)
    assert len([x for x in power_lines(body(store), "DCGM_FI_DEV_POWER_USAGE") if UUID0 in x]) == 1


def test_rotations_forget_only_what_a_whole_generation_did_not_use() -> None:
    """The label cache and the identity numbers keep what is in use and let go of the rest
    (a `rotate()` that did nothing would keep every label set and number forever). The general
    path only: a replayed resource's lines live in its plan, see test_replay."""
    store, translator = SeriesStore(), make_translator("otel", replay=False)
    gone, kept = device(0, held_by("old")), device(1, held_by("x"))
    ingest(translator, store, (gone, kept))
    key, kept_key = store.identities.key(gone.identity), store.identities.key(kept.identity)
    cached = translator.labels.lines(tuple(gone.resource.items()))
    assert len(translator.labels) == 2
    translator.labels.rotate()
    store.rotate()
    ingest(translator, store, (kept,), now=2.0)  # only GPU 1 reports in this generation
    translator.labels.rotate()
    store.rotate()
    assert len(translator.labels) == 1  # the kept GPU's, from the generation before
    assert store.identities.key(kept.identity) == kept_key  # still known, same number
    assert store.identities.key(gone.identity) != key  # forgotten: a new number, never the old one
    assert translator.labels.lines(tuple(gone.resource.items())) is not cached
    assert translator.labels.lines(tuple(kept.resource.items())) != {}


def test_an_identity_keeps_its_number_and_others_get_their_own() -> None:
    identities = Identities()
    a, b = identities.key("gpu-a"), identities.key(("alloc", "gpu-a"))
    assert a != b
    assert (identities.key("gpu-a"), identities.key(("alloc", "gpu-a"))) == (a, b)


def test_a_number_survives_one_rotation_and_is_forgotten_after_a_whole_generation() -> None:
    identities = Identities()
    a, b = identities.key("a"), identities.key("b")
    assert list(identities.rotate()) == []  # nothing was retired before
    assert identities.key("a") == a  # seen again in the next generation: same number
    assert list(identities.rotate()) == [b]  # b unseen for a whole generation
    assert identities.key("a") == a
    assert identities.key("b") not in (a, b)  # b comes back as new; no number is reused


def test_a_number_taken_back_from_the_old_generation_stays_taken() -> None:
    identities = Identities()
    a = identities.key("a")
    identities.rotate()
    assert identities.key("a") == a
    assert identities.key("a") == a
    assert list(identities.rotate()) == []  # a is current again: nothing to forget
    assert list(identities.rotate()) == [a]


def test_numbers_are_new_for_every_identity_ever_seen() -> None:
    identities = Identities()
    seen = []
    for generation in range(3):
        seen += [identities.key(("gen", generation, i)) for i in range(3)]
        identities.rotate()
    assert len(set(seen)) == len(seen)


def test_update_times_are_kept_per_batch_and_trimmed_by_expiry() -> None:
    """A series' update time is its last batch's time: rewriting it keeps it alive, and the
    store forgets the times of batches older than the expiry cutoff (bounded memory)."""
    store, translator = SeriesStore(), make_translator("otel")
    for now in (1.0, 100.0, 200.0, 350.0):
        ingest(translator, store, (device(1, {}),), now=now)
    ingest(translator, store, (device(0, {}),), now=10.0)
    # GPU 0 (t=10), its power and info series; GPU 1 rewritten at 350
    assert store.expire(now=360.0, max_age=300.0) == 2
    assert [line.split("{")[0] for line in power_lines(body(store))] == ["hw_power_watts"]
    assert sorted(store.times.values()) == [100.0, 200.0, 350.0]
    assert store.expire(now=700.0, max_age=300.0) == 2
    assert (body(store), store.times) == ([], {})
