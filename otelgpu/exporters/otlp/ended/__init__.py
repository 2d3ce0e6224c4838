"""Series that end are closed downstream: one point flagged "no recorded value" each.

A pushed series has no scrape to miss: a backend fed by OTLP (Prometheus' OTLP endpoint, Mimir,
a Collector's prometheus or prometheusremotewrite exporter) keeps serving its last value until
its own lookback ends, five minutes in Prometheus. A holder that left a shared GPU would go on
being billed for its share that long, and a GPU that recovered would still read degraded.
OTLP's answer is the data point flag `FLAG_NO_RECORDED_VALUE`: each of those backends turns
such a point into a staleness marker (or drops the series), so the series ends at once.

`EndedSeries` remembers, per identity (`ResourceMetrics.identity`) and metric, the series it
sent last. When the identity reports a metric again, each series of that metric whose point
attributes it no longer reports gets one flagged point (value NaN), under the resource and
metric it was sent with, at the time of the metric's new points and never earlier than a
millisecond after the metric's last ones. As in the Prometheus exporter's sets, a metric the
identity does not report in a batch is left alone (another pipeline sending to the same
exporter may report it); an identity that reports no metrics at all in a batch (its "gone"
marker) closes everything it sent but what the same batch sends.

Point attributes decide, not resource attributes: a backend that keeps only point attributes
as labels (Prometheus' OTLP endpoint by default) sees a GPU whose pod changed as one continuing
series, and closing it there would mark the live series stale. What point attributes tell apart
is what ends: a holder's allocation series, a process, a GPU health state, a lost GPU's
readings. Attribute values are compared as a backend's labels compare them (as text), so a value
that only changed type never closes its live series.

A closing point is owed until a request carrying it is accepted (`closes` hands out a
`Receipt` with the request; `accepted` or `refused` settles it): a request the sending queue
refused or the retries gave up leaves its closing points to the next request, at that
request's time, unless the series came back meanwhile (closing it then would end a live
series). An owed point is dropped after `FORGET_AFTER` (the backend's lookback has ended the
series by then) and at most `LIMIT` are owed (the oldest dropped first).

A reload hands the memory to the new exporter (`inherit`): what the old service sent is closed
as it ends, as if nothing had stopped, and what the new configuration no longer sends at all
(an identity, or a metric of one, never reported again) is closed once it is overdue: not
reported within twice its identity's longest gap between two reports (15 s when it was
reported once) after the new exporter's first batch.

A steady cycle (nothing ended) is what this costs most often: when a batch has the same
identities as the last two, the resources that each renewed their identity alone are compared
with what they sent last and taken together in C (`steady.Shape`), and what the closing points
would be sent with (each metric's time, each identity's resource, when it was seen) is kept as
flat lists, written into the identities only when something next changes; only the others (a
shared GPU's allocation series, anything that changed) are told apart identity by identity
(`memory.py`, with `sent.py`'s records and `closing.py`'s points). The exporter's encoder, which
looks up every point's encoded attributes and every descriptor of a batch anyway, writes them
down as it goes (`trail.py`); a batch whose trail is the last one's, which a shape took, is
taken from the trail alone: one comparison of two lists in C, by identity first, and nothing in
the batch looked at again. `python -m bench.otlp_ended_steady` counts what this costs a steady
cycle per point, the trail's writing included.

The set rule is the Prometheus exporter's (`exporters/prometheus/series.py`, `Family.write`,
`settle`, `SeriesStore.empty`), kept in two places on purpose, and held to agree by
tests/unit/exporters/otlp/test_otlp_ended_same_sets_as_prometheus.py (on the same random batch
histories, what this closes is exactly what the store drops). Only the rule is common; what it
is applied to is not:

- the members differ: a Prometheus line is its rendered text (the translated family name, every
  resource and point label) and belongs to whichever identity wrote it last, so a line another
  identity writes is taken over, never dropped; a series here is an identity's metric name and
  point attributes as text, resource attributes left out (above). A GPU whose pod changed drops
  its line from `/metrics` and closes nothing over OTLP; two OTel metrics that translate to one
  Prometheus family are one set there and two here;
- the steady cycle is recognised from different facts: the store from the batch stamp each line
  gets as it is written (and its replay plans, which write values into lines they know), this
  memory from the attribute mappings (or, through the encoder's trail, the encoded attributes)
  a batch shares with the last one, compared in C before any series key is built. One shared
  set object would have to be handed every series of every cycle by both, as a key each: a
  Python call per series on the Prometheus ingest path, which makes none for a steady
  identity, and keys here that are built only when something changed.

Only identities are tracked (a resource without one is never closed), an identity not reported
for `FORGET_AFTER` is forgotten (a backend's lookback has ended its series by then), and at
most `LIMIT` identities are remembered (the first remembered are forgotten first).
"""

from otelgpu.exporters.otlp.ended.closing import Receipt
from otelgpu.exporters.otlp.ended.memory import FORGET_AFTER, LIMIT, EndedSeries

__all__ = ["FORGET_AFTER", "LIMIT", "EndedSeries", "Receipt"]
