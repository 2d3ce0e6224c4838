"""The summary reader over a realistic kubelet summary, its gaps and its malformed corners."""

from __future__ import annotations

from typing import Any

import pytest

from otelgpu.pdata.model import MetricKind
from otelgpu.receivers.kubelet_stats.metrics import CATALOG, CATALOGS, Group, Naming
from otelgpu.receivers.kubelet_stats.summary import Gap, SummaryReader, parse_time
from tests.peers.kubelet_stats_server import NODE, NOW, T0, sample_summary
from tests.unit.receivers.kubelet_stats.conftest import by_name, find, value

ALL = frozenset(spec.name for spec in CATALOG)
NOW_NS = 1_900_000_000_000_000_000
POD = {
    "k8s__node__name": NODE,
    "host__name": NODE,
    "k8s__namespace__name": "ml",
    "k8s__pod__name": "trainer-0",
    "k8s__pod__uid": "6f1e2d3c-0000-4a5b-8c7d-1",
}


def read(summary: dict[str, Any], enabled: frozenset[str] = ALL) -> Any:
    return SummaryReader(enabled).read(summary, NOW_NS)


def test_parse_time() -> None:
    assert parse_time("1970-01-01T00:00:01Z") == 1_000_000_000
    assert parse_time("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert parse_time("1970-01-01T00:00:01.000000007Z") == 1_000_000_007
    assert parse_time("1970-01-01T01:00:01+01:00") == 1_000_000_000
    for bad in (None, "", "yesterday", "2026-13-45T00:00:00Z", 17):
        assert parse_time(bad) == 0


def test_every_catalog_metric_is_read_from_a_realistic_summary() -> None:
    reading = read(sample_summary())
    emitted = {m.name: m for rm in reading.batch for m in rm.metrics}
    assert set(emitted) == set(ALL)
    for spec in CATALOG:
        metric = emitted[spec.name]
        assert (metric.unit, metric.kind, metric.monotonic) == (
            spec.unit,
            spec.kind,
            spec.monotonic,
        )
        assert all(set(p.attributes) == set(spec.attributes) for p in metric.points)


def test_resources_and_values() -> None:
    batch = read(sample_summary()).batch
    node = find(batch, k8s__node__name=NODE, host__name=NODE)
    assert value(node, "k8s.node.cpu.usage") == pytest.approx(4.25)
    assert value(node, "k8s.node.memory.working_set") == 20 << 30
    assert value(node, "k8s.node.filesystem.capacity") == 200 << 30

    pod = find(batch, **POD)
    assert value(pod, "k8s.pod.cpu.time") == pytest.approx(7300)
    assert value(pod, "k8s.pod.filesystem.usage") == 6 << 20  # its ephemeral storage

    trainer = find(batch, **POD, k8s__container__name="trainer")
    assert value(trainer, "container.cpu.usage") == pytest.approx(3.5)
    assert value(trainer, "container.memory.rss") == 3 << 30
    assert value(trainer, "container.filesystem.usage") == 2 << 20  # its rootfs

    data = find(
        batch, **POD, k8s__volume__name="data", k8s__persistentvolumeclaim__name="data-trainer-0"
    )
    assert value(data, "k8s.pod.volume.available") == 9 << 30
    assert value(data, "k8s.pod.volume.usage") == 1 << 30
    token = find(batch, **POD, k8s__volume__name="kube-api-access-x7k2p")
    assert value(token, "k8s.pod.volume.inode.used") == 200_000
    # node, one pod, two containers, two volumes; the pending pod has nothing to say yet,
    # and the system containers are not reported.
    assert len(batch) == 6


def test_cumulative_sums_start_at_the_entity_start_and_are_stamped_with_the_sample() -> None:
    batch = read(sample_summary()).batch
    trainer = find(batch, **POD, k8s__container__name="trainer")
    (point,) = by_name(trainer)["container.cpu.time"].points
    assert point.start_time_unix_nano == parse_time(T0)
    assert point.time_unix_nano == parse_time(NOW)
    (gauge,) = by_name(trainer)["container.memory.usage"].points
    assert gauge.start_time_unix_nano == 0


def test_network_is_per_interface_and_direction() -> None:
    pod = find(read(sample_summary()).batch, **POD)
    points = {
        (p.attributes["network.interface.name"], p.attributes["network.io.direction"]): p.value
        for p in by_name(pod)["k8s.pod.network.errors"].points
    }
    assert points == {
        ("eth0", "receive"): 0,
        ("eth0", "transmit"): 1,
        ("net1", "receive"): 2,
        ("net1", "transmit"): 1,
    }
    assert by_name(pod)["k8s.pod.network.io"].kind is MetricKind.SUM


def test_network_without_an_interface_list_uses_the_default_interface() -> None:
    summary = sample_summary()
    del summary["node"]["network"]["interfaces"]
    node = find(read(summary).batch, k8s__node__name=NODE, host__name=NODE)
    assert {
        p.attributes["network.interface.name"] for p in by_name(node)["k8s.node.network.io"].points
    } == {"eth0"}


def test_partial_entries_emit_what_is_there() -> None:
    reading = read(sample_summary())
    shipper = find(reading.batch, **POD, k8s__container__name="log-shipper")
    names = set(by_name(shipper))
    assert not any(n.startswith("container.cpu.") for n in names)  # no cpu block yet
    assert "container.memory.rss" not in names  # null
    assert "container.memory.working_set" in names
    assert reading.gaps == {
        (Group.POD, Gap.EMPTY_NAME): 1,  # the pod without a name
        (Group.POD, Gap.NO_STATS_YET): 1,  # the pending pod
        (Group.CONTAINER, Gap.NO_STATS_YET): 1,  # and its container
    }


def test_missing_times_fall_back_to_now_and_zero_start() -> None:
    summary = sample_summary()
    node = summary["node"]
    del node["cpu"]["time"], node["startTime"]
    (point,) = by_name(find(read(summary).batch, k8s__node__name=NODE, host__name=NODE))[
        "k8s.node.cpu.time"
    ].points
    assert (point.time_unix_nano, point.start_time_unix_nano) == (NOW_NS, 0)


@pytest.mark.parametrize(
    "summary",
    [
        {},
        {"node": None, "pods": None},
        {"node": [], "pods": {}},
        {"node": {"cpu": "lots", "memory": {"usageBytes": "1Gi", "rssBytes": True}}},
        {
            "pods": [
                None,
                3,
                {"podRef": "x"},
                {"podRef": {"name": "p", "namespace": "n"}, "containers": "c"},
            ]
        },
        {
            "pods": [
                {"podRef": {"name": "p", "namespace": "n"}, "cpu": {"usageNanoCores": float("nan")}}
            ]
        },
    ],
)
def test_malformed_summaries_never_raise(summary: dict[str, Any]) -> None:
    assert read(summary).batch == ()


def test_unnamed_containers_and_volumes_are_skipped_and_counted() -> None:
    summary = sample_summary()
    pod = summary["pods"][0]
    pod["containers"].append({"cpu": {"usageNanoCores": 1}})
    pod["volume"].append({"capacityBytes": 1})
    gaps = read(summary).gaps
    assert (gaps[(Group.CONTAINER, Gap.EMPTY_NAME)], gaps[(Group.VOLUME, Gap.EMPTY_NAME)]) == (1, 1)


def test_only_enabled_metrics_and_groups_are_read() -> None:
    batch = read(
        sample_summary(), frozenset({"k8s.node.cpu.usage", "container.memory.usage"})
    ).batch
    assert {m.name for rm in batch for m in rm.metrics} == {
        "k8s.node.cpu.usage",
        "container.memory.usage",
    }
    assert len(batch) == 3  # the node and two containers


def test_big_integers_keep_every_digit() -> None:
    summary = sample_summary()
    summary["node"]["memory"]["usageBytes"] = 2**60 + 1
    node = find(read(summary).batch, k8s__node__name=NODE, host__name=NODE)
    assert value(node, "k8s.node.memory.usage") == 2**60 + 1


def test_a_summary_without_a_node_name_is_a_gap_and_its_series_lack_the_label() -> None:
    summary = sample_summary()
    summary["node"]["nodeName"] = ""
    reading = read(summary)
    assert reading.gaps[(Group.NODE, Gap.NO_NODE_NAME)] == 1
    assert all("k8s.node.name" not in rm.resource for rm in reading.batch)
    assert all("host.name" not in rm.resource for rm in reading.batch)


def test_a_pod_without_a_uid_is_a_gap_told_apart_by_namespace_and_name() -> None:
    summary = sample_summary()
    del summary["pods"][0]["podRef"]["uid"]
    reading = read(summary)
    assert reading.gaps[(Group.POD, Gap.NO_UID)] == 1
    assert ("pod", "ml", "trainer-0") in {rm.identity for rm in reading.batch}


def test_identities_are_the_entity_not_its_labels() -> None:
    batch = read(sample_summary()).batch
    uid = POD["k8s__pod__uid"]
    assert {rm.identity for rm in batch} == {
        ("node", NODE),
        ("pod", uid),
        ("container", uid, "trainer"),
        ("container", uid, "log-shipper"),
        ("volume", uid, "data"),
        ("volume", uid, "kube-api-access-x7k2p"),
    }


def test_semconv_page_faults_are_one_counter_split_into_major_and_minor() -> None:
    """pageFaults counts every fault (the kernel's pgfault), majorPageFaults the major ones."""
    trainer = find(read(sample_summary()).batch, **POD, k8s__container__name="trainer")
    metric = by_name(trainer)["container.memory.paging.faults"]
    assert (metric.kind, metric.monotonic, metric.unit) == (MetricKind.SUM, True, "{fault}")
    points = {p.attributes["system.paging.fault.type"]: p for p in metric.points}
    assert {k: p.value for k, p in points.items()} == {"major": 12, "minor": 123_456 - 12}
    assert all(p.start_time_unix_nano == parse_time(T0) for p in points.values())


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        ({"pageFaults": 5, "majorPageFaults": 9}, {"major": 9}),  # inconsistent: no minor
        ({"pageFaults": 5}, {}),  # no major count: minor cannot be told apart
        ({"majorPageFaults": 3}, {"major": 3}),
    ],
)
def test_page_fault_counts_that_do_not_add_up_give_only_what_is_certain(
    memory: dict[str, int], expected: dict[str, int]
) -> None:
    summary = sample_summary()
    summary["node"]["memory"] = memory
    node = find(read(summary).batch, k8s__node__name=NODE, host__name=NODE)
    points = by_name(node).get("k8s.node.memory.paging.faults")
    got = (
        {p.attributes["system.paging.fault.type"]: p.value for p in points.points} if points else {}
    )
    assert got == expected


def test_contrib_names_and_types() -> None:
    reader = SummaryReader(frozenset(s.name for s in CATALOGS[Naming.CONTRIB]), Naming.CONTRIB)
    batch = reader.read(sample_summary(), NOW_NS).batch
    trainer = find(batch, **POD, k8s__container__name="trainer")
    faults = by_name(trainer)["container.memory.page_faults"]
    assert (faults.kind, faults.monotonic, value(trainer, "container.memory.page_faults")) == (
        MetricKind.GAUGE,
        False,
        123_456,
    )
    assert value(trainer, "container.memory.major_page_faults") == 12
    assert by_name(trainer)["container.filesystem.usage"].kind is MetricKind.GAUGE
    data = find(
        batch, **POD, k8s__volume__name="data", k8s__persistentvolumeclaim__name="data-trainer-0"
    )
    assert set(by_name(data)) == {
        "k8s.volume.available",
        "k8s.volume.capacity",
        "k8s.volume.inodes",
        "k8s.volume.inodes.free",
        "k8s.volume.inodes.used",
    }


def test_semconv_sizes_are_updowncounters() -> None:
    batch = read(sample_summary()).batch
    data = find(
        batch, **POD, k8s__volume__name="data", k8s__persistentvolumeclaim__name="data-trainer-0"
    )
    pod = find(batch, **POD)
    for metric in (
        by_name(data)["k8s.pod.volume.capacity"],
        by_name(pod)["k8s.pod.filesystem.usage"],
    ):
        assert (metric.kind, metric.monotonic) == (MetricKind.SUM, False)
