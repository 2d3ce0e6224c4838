"""Which family a metric's points go to (their values' text: `value_text.py`).

`naming: otel` names a family by the OpenTelemetry → Prometheus translation (`naming.py`).
`naming: dcgm` names it by dcgm-exporter's field where the naming table the exporter was given
has one (`otelgpu.pdata.naming`, filled by the receiver that produces the metric), in the
field's unit (`scale`), printed whole where DCGM keeps an integer and with six decimals where
it keeps a double (dcgm-exporter's `%d` and `%f`), and for the XID field with
the XID code as the value; a metric the table does not name keeps its otel name. Some metrics
are several dcgm fields, told apart by a point attribute (`hw.gpu.utilization` by
`hw.gpu.task`): their family is chosen per point (`Targets.is_split`, `Targets.of_point`), and the
attribute that chose it is not repeated as a label (`Target.drop`); they take the general path
every batch (the replay hands them to it). So does the XID field (`DcgmField.latest`): one
series per GPU, its latest XID's code (the receiver's last point), or `0` with the code `0`
while the GPU has had none, as DCGM's field reads; its points all count as stored.
"""

from __future__ import annotations

from typing import NamedTuple

from otelgpu.exporters.prometheus.labels import AttrItems, Naming
from otelgpu.exporters.prometheus.naming import metric_name, namespaced
from otelgpu.exporters.prometheus.series import FamilyType
from otelgpu.exporters.prometheus.value_text import Target, sample_line, value_line
from otelgpu.pdata.model import Attributes, AttrValue, Metric, MetricKind
from otelgpu.pdata.naming import DcgmField, DcgmNames, NamingTable

Descriptor = tuple[str, str, MetricKind, bool, str]  # name, unit, kind, monotonic, description


class Sample(NamedTuple):
    """One point as the general path writes it: its target, its attributes, its value text
    (with the line's newline)."""

    target: Target
    attributes: AttrItems
    text: str


class Samples(NamedTuple):
    """A metric's points as the general path writes them: `target` (None for a split metric,
    whose samples each have their own, and for a metric whose data could not be read), the
    points that are numbers, and whether every point is one. `folded`: the metric's points are
    one series (`DcgmField.latest`), so its one sample stores them all."""

    metric: Metric
    target: Target | None
    samples: list[Sample]
    complete: bool
    folded: bool = False


class Targets:
    """The targets of one naming, remembered per metric descriptor (and, for the metrics dcgm
    splits, per value of the splitting attribute)."""

    def __init__(self, naming: Naming, namespace: str, names: NamingTable) -> None:
        self._namespace = namespace
        self._dcgm = names.dcgm if naming == "dcgm" else {}
        self._by_name: dict[str, tuple[Descriptor, Target]] = {}
        self._split: dict[tuple[Descriptor, AttrValue | None], Target] = {}

    def samples(self, metrics: tuple[Metric, ...]) -> list[Samples]:
        """Each metric's target and the text of each point that is a number (never raises
        for bad data: a metric it cannot read has no samples)."""
        out: list[Samples] = []
        for metric in metrics:
            points = metric.points
            try:
                if self.is_split(metric):
                    latest = self._latest(metric)
                    if latest is not None:
                        out.append(Samples(metric, None, latest, True, folded=True))
                    else:
                        out.append(Samples(metric, None, self._split_samples(metric), True))
                    continue
                target = self.of(metric)
                plain = target.plain
                samples: list[Sample] = []
                for point in points:
                    try:
                        if plain:
                            text = value_line(point.value)
                        else:
                            text = sample_line(point.value, point.attributes, target)
                    except (TypeError, ValueError, OverflowError):
                        continue  # not a number: counted as dropped by the caller
                    attributes = tuple(point.attributes.items()) if point.attributes else ()
                    samples.append(Sample(target, attributes, text))
                out.append(Samples(metric, target, samples, len(samples) == len(points)))
            except (TypeError, ValueError, AttributeError):  # bad data: never raised
                out.append(Samples(metric, None, [], False))
        return out

    def _split_samples(self, metric: Metric) -> list[Sample]:
        samples: list[Sample] = []
        for point in metric.points:
            target = self.of_point(metric, point.attributes)
            try:
                text = sample_line(point.value, point.attributes, target)
            except (TypeError, ValueError, OverflowError):
                continue
            samples.append(Sample(target, tuple(point.attributes.items()), text))
        return samples

    def _latest(self, metric: Metric) -> list[Sample] | None:
        """The one sample of a `DcgmField.latest` metric (None: `metric` is not one): its last
        point, or its `value_from` attribute at 0 when it has none."""
        names = self._names(metric)
        field = names.field if names is not None else None
        if field is None or not field.latest:
            return None
        target = self.of(metric)
        points = metric.points
        if points:
            value, attributes = points[-1].value, points[-1].attributes
        else:
            value, attributes = 0, {field.value_from: 0}
        try:
            text = sample_line(value, attributes, target)
        except (TypeError, ValueError, OverflowError):
            return []
        return [Sample(target, tuple(attributes.items()), text)]

    def is_split(self, metric: Metric) -> bool:
        """Whether the family of `metric`'s points is chosen apart from its descriptor (a
        point attribute chooses it, or its points are one `DcgmField.latest` series): the
        general path writes it every batch."""
        names = self._names(metric)
        if names is None:
            return False
        return bool(names.split_by) or (names.field is not None and names.field.latest)

    def of(self, metric: Metric) -> Target:
        """The target of a metric that is not split (remembered by name: a metric's descriptor
        is the same batch after batch, so four fields are compared, not a key hashed)."""
        hit = self._by_name.get(metric.name)
        if hit is not None:
            _, unit, kind, monotonic, description = hit[0]
            if (
                kind is metric.kind
                and monotonic == metric.monotonic
                and unit == metric.unit
                and description == metric.description
            ):
                return hit[1]
        target = self._target(metric, {})
        self._by_name[metric.name] = (_descriptor(metric), target)
        return target

    def of_point(self, metric: Metric, attributes: Attributes) -> Target:
        """The target of one point of a split metric."""
        names = self._names(metric)
        chooser = attributes.get(names.split_by) if names is not None else None
        key = (_descriptor(metric), chooser)
        target = self._split.get(key)
        if target is None:
            target = self._split[key] = self._target(metric, attributes)
        return target

    def _names(self, metric: Metric) -> DcgmNames | None:
        names = self._dcgm.get(metric.name)
        return names if names is not None and names.unit == metric.unit else None

    def _target(self, metric: Metric, attributes: Attributes) -> Target:
        counter = metric.kind is MetricKind.SUM and metric.monotonic
        type_: FamilyType = "counter" if counter else "gauge"
        names = self._names(metric)
        found: DcgmField | None = names.of(attributes) if names is not None else None
        if names is not None and found is not None:
            return Target(
                namespaced(self._namespace, found.name),
                found.type or type_,
                found.help or metric.description,
                found.scale,
                names.split_by,
                found.integer,
                found.value_from,
                # DCGM keeps a field as an int64 or a double (the XID field's value is its code)
                fixed=not (found.integer or found.value_from),
            )
        name = metric_name(metric.name, metric.unit, metric.kind, metric.monotonic)
        return Target(namespaced(self._namespace, name), type_, metric.description)


def _descriptor(metric: Metric) -> Descriptor:
    return (metric.name, metric.unit, metric.kind, metric.monotonic, metric.description)
