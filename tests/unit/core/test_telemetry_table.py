"""The self-telemetry table is the one place instruments are declared: every call in the agent's
code names a declared instrument of the right type with exactly its labels, every declared
instrument is used, and anything else raises at the call (a bug) while bad values do not."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

import otelgpu
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.component.telemetry_table import INSTRUMENTS, InstrumentKind, counter, gauge

ROOT = Path(otelgpu.__file__).parent
_KIND = {"count": "counter", "set_gauge": "gauge", "remove_gauge": "gauge"}
_ARGS = {"count": 2, "set_gauge": 2, "remove_gauge": 1}  # name, value: the rest are labels


@dataclass(frozen=True)
class Call:
    where: str
    name: str
    kind: str
    labels: frozenset[str] | None  # None: not written out (`**attributes`)
    extra_args: int  # positional arguments beyond name and value (a description, say)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "text"` assignments."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _calls() -> list[Call]:
    """Every self-telemetry call in `otelgpu/` with the name it passes, resolved through the
    module's constants and the constants it imports from other modules of the agent."""
    trees = {_module(p): (p, ast.parse(p.read_text())) for p in ROOT.rglob("*.py")}
    constants = {module: _constants(tree) for module, (_, tree) in trees.items()}
    calls: list[Call] = []
    for module, (path, tree) in trees.items():
        names = dict(constants[module])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in constants:
                for alias in node.names:
                    if alias.name in constants[node.module]:
                        names[alias.asname or alias.name] = constants[node.module][alias.name]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                call = _telemetry_call(node, node.func, names, f"{path.name}:{node.lineno}")
                if call is not None:
                    calls.append(call)
    return calls


def _telemetry_call(
    node: ast.Call, func: ast.Attribute, names: dict[str, str], where: str
) -> Call | None:
    method, receiver = func.attr, ast.unparse(func.value)
    if method == "_declared":  # SelfTelemetry's own lookup: (instruments, name, attributes)
        return _own_lookup(node, where)
    if method not in _KIND or not node.args:
        return None
    name_arg = node.args[0]
    resolved = _resolved(name_arg, names)
    ours = receiver.endswith("telemetry") or (receiver == "self" and "telemetry.py" in where)
    if method == "count" and not ours and not (resolved or "").startswith("otelgpu_"):
        return None  # str.count, list.count, itertools.count
    assert resolved is not None, f"{where}: the name {ast.unparse(name_arg)} is not a constant"
    keywords = [k.arg for k in node.keywords]
    labels = None if None in keywords else frozenset(k for k in keywords if k is not None)
    return Call(where, resolved, _KIND[method], labels, len(node.args) - _ARGS[method])


def _own_lookup(node: ast.Call, where: str) -> Call | None:
    """`self._declared(self._counters, "otelgpu_...", {})`: a lookup with a written name."""
    kinds, name, labels = node.args
    if not (isinstance(name, ast.Constant) and isinstance(labels, ast.Dict)):
        return None  # the lookup behind count and set_gauge, for the name they were given
    kind = "counter" if "_counters" in ast.unparse(kinds) else "gauge"
    keys = frozenset(k.value for k in labels.keys if isinstance(k, ast.Constant))
    return Call(where, str(name.value), kind, keys, 0)


def _resolved(arg: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Name):
        return names.get(arg.id)
    return None


def test_every_call_names_a_declared_instrument_with_its_labels_and_every_one_is_used() -> None:
    calls = _calls()
    assert len(calls) >= 30  # the walk found the agent's calls (about 35 when written)
    declared = {i.name: i for i in INSTRUMENTS}
    wrong = []
    for call in calls:
        instrument = declared.get(call.name)
        if instrument is None:
            wrong.append(f"{call.where}: {call.name} is not declared")
        elif instrument.kind.value != call.kind:
            wrong.append(f"{call.where}: {call.name} is a {instrument.kind.value}")
        elif call.labels != frozenset(instrument.labels):
            wrong.append(f"{call.where}: {call.name} with {call.labels}, not {instrument.labels}")
        elif call.extra_args:
            wrong.append(f"{call.where}: {call.name} with {call.extra_args} more arguments")
    assert wrong == []
    assert sorted(set(declared) - {c.name for c in calls}) == []  # none declared and unused


def test_every_instrument_is_described_and_named_as_it_is_served() -> None:
    assert len({i.name for i in INSTRUMENTS}) == len(INSTRUMENTS)
    for instrument in INSTRUMENTS:
        assert instrument.name.startswith("otelgpu_") and instrument.description, instrument
        if instrument.kind is InstrumentKind.COUNTER:
            assert instrument.name.endswith("_total") and instrument.unit == "", instrument
        elif instrument.unit == "s":
            assert instrument.name.endswith("_seconds"), instrument
    # HELP on every family (promtool and OpenMetrics want it): all of them, once reported.
    telemetry = SelfTelemetry()
    assert telemetry.collect().metrics[0].description  # build_info, the one set at start


def test_an_undeclared_name_or_label_set_is_a_bug_and_raises() -> None:
    telemetry = SelfTelemetry()
    with pytest.raises(ValueError, match="'otelgpu_unknown_total' is not declared"):
        telemetry.count("otelgpu_unknown_total", 1)
    with pytest.raises(ValueError, match="not declared"):
        telemetry.count("otelgpu_unknown_total", 0)  # even when it would add nothing
    with pytest.raises(ValueError, match=r"takes the labels \['receiver'\], not \['exporter'\]"):
        telemetry.count("otelgpu_receiver_points_total", 1, exporter="x")
    with pytest.raises(ValueError, match="takes the labels"):
        telemetry.count("otelgpu_receiver_points_total", 1)  # a label left out
    with pytest.raises(ValueError, match="gauge 'otelgpu_receiver_points_total' is not declared"):
        telemetry.set_gauge("otelgpu_receiver_points_total", 1, receiver="nvml")
    with pytest.raises(ValueError, match="counter 'otelgpu_source_up' is not declared"):
        telemetry.count("otelgpu_source_up", 1, source="nvml")
    with pytest.raises(ValueError, match="not declared"):
        telemetry.set_gauge("otelgpu_custom", 1)
    with pytest.raises(ValueError, match="takes the labels"):
        telemetry.remove_gauge("otelgpu_source_up", receiver="nvml")
    assert [m.name for m in telemetry.collect().metrics] == ["otelgpu_build_info"]


def test_bad_values_are_left_out_never_raised() -> None:
    telemetry = SelfTelemetry()
    telemetry.count("otelgpu_receiver_points_total", math.nan, receiver="nvml")  # type: ignore[arg-type]
    telemetry.count("otelgpu_receiver_points_total", -3, receiver="nvml")
    telemetry.count("otelgpu_receiver_points_total", math.inf, receiver="nvml")  # type: ignore[arg-type]
    telemetry.set_gauge("otelgpu_collection_duration_seconds", math.nan, receiver="nvml")
    telemetry.count("otelgpu_exporter_sent_points_total", 2, exporter=None)  # type: ignore[arg-type]
    metrics = {m.name: m for m in telemetry.collect().metrics}
    assert set(metrics) == {"otelgpu_build_info", "otelgpu_exporter_sent_points_total"}
    (point,) = metrics["otelgpu_exporter_sent_points_total"].points
    assert (point.attributes, point.value) == ({}, 2)  # a None value is no label


def test_a_table_that_declares_a_name_twice_or_bad_labels_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        SelfTelemetry(instruments=(counter("otelgpu_a_total", "a"), gauge("otelgpu_a_total", "b")))
    with pytest.raises(ValueError, match="bad label names"):
        SelfTelemetry(instruments=(counter("otelgpu_a_total", "a", "pod name"),))
    with pytest.raises(ValueError, match="bad label names"):
        SelfTelemetry(instruments=(counter("otelgpu_a_total", "a", "x", "x"),))
