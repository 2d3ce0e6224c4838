"""The ended-series memory and the Prometheus exporter's store apply one identity-set rule: on
the same batch histories, the series the OTLP memory closes are exactly the lines the
Prometheus ingest (translation, replay plans, series store) drops.

The rule (`otelgpu/exporters/otlp/ended/__init__.py` says why each keeps its own copy): per
identity and metric, the series written in a batch replace that identity's previous set; a
metric the identity does not report is left alone; an identity reported with no metrics closes
everything the same batch does not send for it. Histories here keep each identity's resource
attributes fixed and apart from the others' (where the two deliberately differ: the OTLP memory
tells series apart by point attributes alone, a backend's labels), so one Prometheus line is one
OTLP series.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelgpu.exporters.otlp.encode import AttributeCache
from otelgpu.exporters.otlp.ended import EndedSeries, Receipt
from otelgpu.exporters.otlp.exporter import request_of
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.otlp.batches import INTERVAL, T0
from tests.unit.exporters.prometheus.translators import make_translator

IDENTITIES = ("gpu-0", "gpu-1", "proc-7")
METRICS = ("test.alpha", "test.beta")
VALUES = ("x", "y", "z")
# What one identity does in one batch: not reported, reported with no metrics (gone), or
# reporting some metrics, each with the attribute values of its points (maybe none), maybe with
# the gone marker beside them in another resource of the same batch.
Report = tuple[str, dict[str, frozenset[str]]]
_LABEL = re.compile(r'(\w+)="([^"]*)"')

reports = st.one_of(
    st.just(("absent", {})),
    st.just(("gone", {})),
    st.tuples(
        st.sampled_from(["reports", "reports and gone"]),
        st.dictionaries(
            st.sampled_from(METRICS),
            st.frozensets(st.sampled_from(VALUES)),  # none: a metric without points
            min_size=1,
        ),
    ),
)
batches = st.fixed_dictionaries({identity: reports for identity in IDENTITIES})
# A history repeats batches (the steady cycles both sides take a faster path for) among changes,
# some of which keep every identity's metrics and only move the values of their points
# (`_moved`): a batch shaped as the steady ones that sends other series.
histories = st.lists(
    st.tuples(batches, st.integers(min_value=1, max_value=5), st.booleans()),
    min_size=1,
    max_size=8,
)
_NEXT_VALUE = dict(zip(VALUES, VALUES[1:] + VALUES[:1], strict=True))


def _moved(reported: dict[str, Report]) -> dict[str, Report]:
    """`reported` with every point's value the next one (x, y, z, x): the same identities,
    metrics and point counts, other series."""
    return {
        identity: (
            what,
            {name: frozenset(map(_NEXT_VALUE.get, values)) for name, values in m.items()},
        )
        for identity, (what, m) in reported.items()
    }


def _resource(identity: str, metrics: tuple[Metric, ...]) -> ResourceMetrics:
    return ResourceMetrics(resource={"res": identity}, metrics=metrics, identity=identity)


def _batch(reported: dict[str, Report], time: int, mappings: dict[Any, Any]) -> Batch:
    """The batch; each point's attribute mapping shared with every batch before, as the
    receivers share theirs."""
    out = []
    for identity, (what, metrics) in reported.items():
        if what in ("gone", "reports and gone"):
            out.append(_resource(identity, ()))
        if what.startswith("reports"):
            built = tuple(
                Metric(
                    name=name,
                    unit="",
                    description="",
                    kind=MetricKind.GAUGE,
                    points=tuple(
                        NumberDataPoint(
                            attributes=mappings.setdefault((identity, name, v), {"k": v}),
                            time_unix_nano=time,
                            value=1.0,
                        )
                        for v in sorted(values)
                    ),
                )
                for name, values in metrics.items()
            )
            out.append(_resource(identity, built))
    return tuple(out)


def _prometheus_lines(store: SeriesStore) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """Every line of the store as (family, labels)."""
    return {
        (name, frozenset(_LABEL.findall(prefix)))
        for name, family in store.families.items()
        for prefix in family.series
    }


Closed = set[tuple[str, frozenset[tuple[str, str]]]]  # (family, point and resource labels)


def _closed(closing: Batch) -> Closed:
    """Every closing point as the line it ends."""
    return {
        (metric.name.replace(".", "_"), frozenset({**point.attributes, **rm.resource}.items()))
        for rm in closing
        for metric in rm.metrics
        for point in metric.points
    }


def _requested(receipt: Receipt) -> Closed:
    """Every closing point a request carries (its receipt) as the line it ends."""
    return {
        (owed.descriptor.name.replace(".", "_"), frozenset(
            {**owed.attributes, **owed.head.resource}.items()
        ))
        for owed in receipt
    }  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(histories)
@pytest.mark.parametrize("path", ["memory", "request"])
def test_what_otlp_closes_is_what_the_prometheus_store_drops(
    path: str, history: list[tuple[dict[str, Report], int, bool]]
) -> None:
    # "memory": the memory alone, handed each batch; "request": as the exporter sends, each
    # batch's request written with one attribute cache kept across batches and its trail
    # (`exporter.request_of`), every request accepted.
    wall = [T0]
    ended = EndedSeries(wall=lambda: wall[0])
    cache = AttributeCache()
    translator, store = make_translator("otel"), SeriesStore()
    mappings: dict[Any, Any] = {}
    steps = [
        step
        for reported, times, moved in history
        for step in [reported] * times + ([_moved(reported)] if moved else [])
    ]
    for reported in steps:
        wall[0] += INTERVAL
        batch = _batch(reported, wall[0], mappings)
        before = _prometheus_lines(store)
        translator.ingest(store, batch, wall[0] / 1e9)
        dropped = before - _prometheus_lines(store)
        if path == "memory":
            assert _closed(ended.closing(batch)) == dropped
        else:
            _, receipt = request_of(batch, cache, ended)
            assert _requested(receipt) == dropped
            ended.accepted(receipt)
