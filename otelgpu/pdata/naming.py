"""Names a receiver's metrics have in another tool's vocabulary: a naming table.

The agent's metrics are named by the OpenTelemetry conventions; an exporter may render them in
another vocabulary that dashboards already use (the prometheus exporter's `naming: dcgm`,
dcgm-exporter's `DCGM_FI_*` fields). Only the receiver that produces a metric knows which field
it is, in which unit and which attribute tells several fields apart, so the receiver fills a
`NamingTable` from its catalog and its factory carries it (`Factory.naming`); the service hands
the tables of the receivers a config uses to every component (`Settings.naming`), merged. An
exporter reads the table it was given: it imports no receiver, and nothing is registered in
process-wide state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from otelgpu.pdata.model import AttrValue


@dataclass(frozen=True, slots=True)
class DcgmField:
    """One dcgm-exporter field a metric's points render as.

    name: the field (`DCGM_FI_DEV_GPU_UTIL`). scale: the metric's value times `scale` is the
    field's (its unit: % for a ratio, MiB for bytes, ...). integer: DCGM keeps the field as an
    integer, so dcgm-exporter prints it whole (the scaled value is rounded); otherwise DCGM keeps
    a double, which dcgm-exporter prints with six decimals (`%f`). type: the
    Prometheus type dcgm-exporter declares where it is not the metric's own ("" otherwise).
    value_from: a point attribute whose value is the sample instead of the point's value (the
    XID field holds the XID code). help: the family's HELP text, for the field as served (its
    unit, its part of a split metric); "" keeps the metric's description. latest: the field is
    one series per resource holding the metric's last point (its receiver puts the latest
    reading last), and, while the metric has no point, the value 0 of `value_from` (DCGM's XID
    field reads 0 until the GPU's first XID).
    """

    name: str
    scale: float = 1.0
    integer: bool = False
    type: Literal["", "gauge", "counter"] = ""
    value_from: str = ""
    help: str = ""
    latest: bool = False


@dataclass(frozen=True, slots=True)
class DcgmNames:
    """The dcgm fields of one metric, emitted in `unit`: `field`, or, when dcgm-exporter has a
    field per value of one point attribute, `splits` by the value of `split_by` (a value not
    listed has no field). A point of the metric in another unit has none either."""

    unit: str
    field: DcgmField | None = None
    split_by: str = ""
    splits: Mapping[AttrValue, DcgmField] = dataclasses.field(default_factory=dict)

    def of(self, attributes: Mapping[str, AttrValue]) -> DcgmField | None:
        """The field of a point with `attributes`."""
        if self.split_by:
            return self.splits.get(attributes.get(self.split_by, ""))
        return self.field


@dataclass(frozen=True, slots=True)
class NamingTable:
    """What one receiver (or, merged, several) names differently in dcgm-exporter's terms.

    dcgm: per OTel metric name, its dcgm fields. dcgm_labels: point attributes with a
    dcgm-exporter label of their own (the XID code is `err_code`)."""

    dcgm: Mapping[str, DcgmNames] = dataclasses.field(default_factory=dict)
    dcgm_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @staticmethod
    def merge(tables: Iterable[NamingTable | None]) -> NamingTable:
        """One table of several (a metric two receivers name: the first one's names win)."""
        dcgm: dict[str, DcgmNames] = {}
        labels: dict[str, str] = {}
        for table in tables:
            if table is None:
                continue
            for name, names in table.dcgm.items():
                dcgm.setdefault(name, names)
            for key, label in table.dcgm_labels.items():
                labels.setdefault(key, label)
        return NamingTable(dcgm, labels)


NO_NAMES = NamingTable()
