"""The general path of Prometheus ingest: any resource, in any shape.

A resource goes through four steps, each done for all its metrics at once: each metric's
target and each point's value text (`targets.py`: points that are not numbers are left out,
and counted by the caller as dropped), each series' line (`labels.py`, cached per resource),
the writes (`series.py`: `Family.write` claims a line the identity did not own, and the
identity's set in each family is replaced at commit), and, with a `Recorder`, the resource's
replay plan (`replay.py`), usable only when every point was stored. A device's resource also
writes its info series (`device_info.py`).

Nothing here raises for bad data. A metric whose data cannot be read, or whose family name
belongs to a family of another type, stores none of its points.
"""

from __future__ import annotations

from otelgpu.exporters.prometheus import device_info
from otelgpu.exporters.prometheus.labels import AttrItems, LabelRenderer
from otelgpu.exporters.prometheus.replay import Recorder, Written
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.targets import Targets
from otelgpu.pdata.model import Metric


class GeneralPath:
    """Writes resources the general way, for one naming."""

    def __init__(self, targets: Targets, labels: LabelRenderer, info_name: str) -> None:
        self._targets = targets
        self._labels = labels
        self._info_name = info_name

    def write_resource(
        self,
        store: SeriesStore,
        identity: int,
        resource: AttrItems,
        metrics: tuple[Metric, ...],
        record: Recorder | None = None,
        info: bool = False,
    ) -> tuple[int, int, bool]:
        """Every metric of one resource (copy), and with `info` its device's info series; how
        many points it stored, of how many, and whether `record` recorded all of it (every
        point stored: its plan can replace this path next time)."""
        return self._write_metrics(store, identity, resource, metrics, record, info)

    def write_split(
        self, store: SeriesStore, identity: int, resource: AttrItems, metric: Metric
    ) -> int:
        """The general path of one split metric (dcgm's fields chosen by a point attribute),
        for a replay that meets one; how many points it stored."""
        return self._write_metrics(store, identity, resource, (metric,), None, False)[0]

    def _write_metrics(
        self,
        store: SeriesStore,
        identity: int,
        resource: AttrItems,
        metrics: tuple[Metric, ...],
        record: Recorder | None,
        info: bool,
    ) -> tuple[int, int, bool]:
        planned = self._targets.samples(metrics)
        keys = [(s.target.name, s.attributes, s.target.drop) for m in planned for s in m.samples]
        lines = self._labels.prefixes(resource, keys)
        info_line = self._labels.info_prefix(self._info_name, resource) if info else None
        batch, families, at = store.batch, store.families, 0
        written: list[Written] = []
        if info_line is not None:
            family = store.family(self._info_name, device_info.INFO_TYPE, device_info.INFO_HELP)
            if family is not None:
                family.write(identity, info_line, device_info.INFO_VALUE, batch)
                written.append(Written(None, family, [info_line]))
        stored = total = 0
        for samples in planned:
            mine, at = lines[at : at + len(samples.samples)], at + len(samples.samples)
            total += len(samples.metric.points)
            target = samples.target
            if target is None:  # split (each sample has its family) or unreadable
                wrote = 0
                for sample, line in zip(samples.samples, mine, strict=True):
                    t = sample.target
                    split = store.family(t.name, t.type, t.help)
                    if split is not None:
                        split.write(identity, line, sample.text, batch)
                        wrote += 1
                # a folded metric's one line holds all its points (`Samples.folded`)
                stored += len(samples.metric.points) if samples.folded and wrote else wrote
                written.append(Written(samples, None, mine))
                continue
            family = families.get(target.name)
            if family is None or family.type != target.type:
                family = store.family(target.name, target.type, target.help)
                if family is None:  # the name belongs to a family of another type
                    written.append(Written(samples, None, []))
                    continue
            family.touch(identity)  # its set is replaced even when no point is a number
            for sample, line in zip(samples.samples, mine, strict=True):
                family.write(identity, line, sample.text, batch)
            stored += len(mine)
            written.append(Written(samples, family, mine))
        complete = record is not None and record.record(written)
        return stored, total, complete
