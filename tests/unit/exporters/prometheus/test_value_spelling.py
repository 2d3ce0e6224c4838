"""Every path that writes a sample value spells it the same way, with one formatter
(`value_text.value_line`, and `sample_line` for dcgm-exporter's converted fields): the general
path and the replay, a metric of one point and one of several, a value written as it comes and
one converted to a dcgm field (six decimals, scaled and rounded). The table holds the bytes each
path wrote before they shared one formatter, over values at the format's edges: NaN, the
infinities, -0.0, ints past 2**53 and 2**63, the switch to exponents at 1e16 and the values
around 1e21, subnormals and the largest double, and data that is no number (dropped by every
path alike, an int too long to write included)."""

from __future__ import annotations

import math

import pytest

from otelgpu.exporters.prometheus import device_info
from otelgpu.exporters.prometheus.general import GeneralPath
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gpu
from tests.unit.exporters.prometheus.translators import make_translator

# (naming, metric, unit): written as it comes; dcgm's power (six decimals); dcgm's SM clock
# (Hz to MHz, rounded); dcgm's memory copy utilization (ratio to %, rounded)
PATHS = (
    ("otel", "x.value", "1"),
    ("dcgm", "hw.power", "W"),
    ("dcgm", "nvidia.gpu.sm.clock", "Hz"),
    ("dcgm", "nvidia.gpu.memory.busy", "1"),
)
_MAX = 1.7976931348623157e308  # the largest double: its %f and MHz texts are 300 digits long

# value → its line text on each of PATHS (None: not stored)
TABLE: list[tuple[object, str | None, str | None, str | None, str | None]] = [
    (0, "0\n", "0.000000\n", "0\n", "0\n"),
    (1, "1\n", "1.000000\n", "0\n", "100\n"),
    (-3, "-3\n", "-3.000000\n", "0\n", "-300\n"),
    (2**53, "9007199254740992\n", "9007199254740992.000000\n", "9007199255\n",
     "900719925474099200\n"),
    (2**53 + 1, "9007199254740993\n", "9007199254740992.000000\n", "9007199255\n",
     "900719925474099200\n"),
    (2**63 - 1, "9223372036854775807\n", "9223372036854775808.000000\n", "9223372036855\n",
     "922337203685477580800\n"),
    (-(2**63), "-9223372036854775808\n", "-9223372036854775808.000000\n", "-9223372036855\n",
     "-922337203685477580800\n"),
    (10**21, "1000000000000000000000\n", "1000000000000000000000.000000\n",
     "1000000000000000\n", "99999999999999991611392\n"),
    (10**400, "1" + "0" * 400 + "\n", None, None, None),  # no float: only the as-is path
    (10**5000, None, None, None, None),  # too long to write: dropped, on a replay too
    (0.0, "0.0\n", "0.000000\n", "0\n", "0\n"),
    (-0.0, "-0.0\n", "-0.000000\n", "0\n", "0\n"),
    (0.1, "0.1\n", "0.100000\n", "0\n", "10\n"),
    (-2.5, "-2.5\n", "-2.500000\n", "0\n", "-250\n"),
    (1 / 3, "0.3333333333333333\n", "0.333333\n", "0\n", "33\n"),
    (0.30000000000000004, "0.30000000000000004\n", "0.300000\n", "0\n", "30\n"),
    (100.0, "100.0\n", "100.000000\n", "0\n", "10000\n"),
    (1e15, "1000000000000000.0\n", "1000000000000000.000000\n", "1000000000\n",
     "100000000000000000\n"),
    (1e16, "1e+16\n", "10000000000000000.000000\n", "10000000000\n", "1000000000000000000\n"),
    (1e20, "1e+20\n", "100000000000000000000.000000\n", "100000000000000\n",
     "10000000000000000000000\n"),
    (9.999999999999999e20, "9.999999999999999e+20\n", "999999999999999868928.000000\n",
     "1000000000000000\n", "99999999999999991611392\n"),
    (1e21, "1e+21\n", "1000000000000000000000.000000\n", "1000000000000000\n",
     "99999999999999991611392\n"),
    (1.0000000000000003e21, "1.0000000000000003e+21\n", "1000000000000000262144.000000\n",
     "1000000000000000\n", "100000000000000025165824\n"),
    (1e22, "1e+22\n", "10000000000000000000000.000000\n", "10000000000000000\n",
     "999999999999999983222784\n"),
    (-1e21, "-1e+21\n", "-1000000000000000000000.000000\n", "-1000000000000000\n",
     "-99999999999999991611392\n"),
    (1e-4, "0.0001\n", "0.000100\n", "0\n", "0\n"),
    (1e-5, "1e-05\n", "0.000010\n", "0\n", "0\n"),
    (5e-324, "5e-324\n", "0.000000\n", "0\n", "0\n"),
    (_MAX, "1.7976931348623157e+308\n", f"{int(_MAX)}.000000\n", f"{int(_MAX * 1e-6)}\n",
     None),  # as a percentage it overflows to inf, which no integer field can hold
    (math.nan, "NaN\n", "NaN\n", None, None),
    (math.inf, "+Inf\n", "+Inf\n", None, None),
    (-math.inf, "-Inf\n", "-Inf\n", None, None),
    (True, "1.0\n", "1.000000\n", "0\n", "100\n"),
    (False, "0.0\n", "0.000000\n", "0\n", "0\n"),
    ("1.5", "1.5\n", None, None, None),  # a number's text converts; scaling it fails
    ("nan", "NaN\n", None, None, None),
    ("abc", None, None, None, None),
    (None, None, None, None, None),
    (1 + 2j, None, None, None, None),
]  # fmt: skip


def _id(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 100:
        return f"int-of-{value.bit_length()}-bits"
    return f"{type(value).__name__}:{value!r}"


def _node(name: str, unit: str, value: object, points: int) -> tuple[ResourceMetrics, ...]:
    attributes = [{"i": i} for i in range(points)] if points > 1 else [{}]
    metric = Metric(
        name=name,
        unit=unit,
        description="d",
        kind=MetricKind.GAUGE,
        points=tuple(
            NumberDataPoint(attributes=a, time_unix_nano=1, value=value)  # type: ignore[arg-type]
            for a in attributes
        ),
    )
    return (ResourceMetrics(resource=gpu(0), metrics=(metric,), identity="g"),)


@pytest.mark.parametrize("points", [1, 2])
@pytest.mark.parametrize("replayed", [False, True], ids=["general", "replay"])
@pytest.mark.parametrize(
    ("value", "as_is", "fixed", "mhz", "percent"),
    TABLE,
    ids=[_id(row[0]) for row in TABLE],
)
def test_every_path_writes_a_value_as_before(
    value: object,
    as_is: str | None,
    fixed: str | None,
    mhz: str | None,
    percent: str | None,
    replayed: bool,
    points: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    general_calls: list[object] = []
    write_resource = GeneralPath.write_resource

    def counted(self: GeneralPath, *args: object, **kwargs: object) -> object:
        general_calls.append(args)
        return write_resource(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GeneralPath, "write_resource", counted)
    for (naming, name, unit), expected in zip(PATHS, (as_is, fixed, mhz, percent), strict=True):
        store, translator = SeriesStore(), make_translator(naming)
        if replayed:  # a plan first, from a value every path writes
            translator.ingest(store, _node(name, unit, 1.0, points), 1.0)
        general_calls.clear()
        stored, dropped = translator.ingest(store, _node(name, unit, value, points), 2.0)
        texts = [
            text
            for family in store.families.values()
            if family.name != device_info.INFO_NAME  # the GPU's info series
            for _, text in family.lines()
        ]
        assert texts == ([] if expected is None else [expected] * points), (naming, name)
        assert (stored, dropped) == ((points, 0) if expected is not None else (0, points))
        if replayed and expected is not None:
            assert general_calls == [], "a number the plan can write is replayed"
