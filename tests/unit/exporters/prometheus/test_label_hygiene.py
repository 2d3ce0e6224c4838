"""Label hygiene: control characters, length caps, reserved names; checked by real parsers."""

from __future__ import annotations

import re
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.component.component import Kind
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.labels import MAX_VALUE_LENGTH, LabelRenderer
from otelgpu.exporters.prometheus.render import encode, render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.fakes import FakeClock, FakeHost
from tests.peers.runtime import require_binary
from tests.unit.exporters.prometheus.batches import batch, gpu, held_by
from tests.unit.exporters.prometheus.translators import make_translator, nvml_settings
from tests.unit.processors.container_env.helpers import counter

# Every character class the text format cannot carry, each between two letters.
HOSTILE = {
    "cr": "a\rb",
    "vt": "a\x0bb",
    "ff": "a\x0cb",
    "nul": "a\x00b",
    "esc": "a\x1b[31mb",
    "tab": "a\tb",
    "del": "a\x7fb",
    "nel": "a\x85b",  # C1
    "csi": "a\x9bb",  # C1
    "line_separator": "a\u2028b",
    "paragraph_separator": "a\u2029b",
    "surrogate": "a\ud800b",  # decodable from JSON, not encodable as UTF-8
}
# Bytes no line of a safe body may hold: C0 but newline, DEL, C1 (UTF-8), U+2028/9 (UTF-8).
_BAD_BYTES = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")


def _body(naming: str, resources: list[dict[str, AttrValue]], help_: str = "Utilization.") -> str:
    batch = tuple(
        ResourceMetrics(
            resource=resource,
            metrics=(
                Metric(
                    name="hw.gpu.utilization",
                    unit="1",
                    description=help_,
                    kind=MetricKind.GAUGE,
                    points=(NumberDataPoint(attributes={}, time_unix_nano=1, value=0.5),),
                ),
            ),
        )
        for resource in resources
    )
    store = SeriesStore()
    make_translator(naming).ingest(store, batch, now=1.0)
    text, _ = render_text(store.families.values())
    return text


def _labels(text: str) -> list[dict[str, str]]:
    """The label sets of the metric's series (not the devices' info series)."""
    families = text_string_to_metric_families(text)
    return [dict(s.labels) for f in families if f.name != "hw_gpu_info" for s in f.samples]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_unsafe_characters_in_values_are_replaced(name: str) -> None:
    text = _body("otel", [gpu(0, **{"k8s.pod.name": HOSTILE[name]})])
    body = encode(text, 1).plain  # a lone surrogate used to raise here: no body at all
    assert _BAD_BYTES.search(body) is None
    expected = HOSTILE[name].replace(HOSTILE[name][1], "\ufffd")
    assert [labels["k8s_pod_name"] for labels in _labels(text)] == [expected]


def test_escapes_the_format_defines_are_kept() -> None:
    value = 'q"b\\s\nn\r'
    renderer = LabelRenderer("otel", {})
    assert renderer.render((("a", value),), ()) == '{a="q\\"b\\\\s\\nn\ufffd"}'


def test_long_values_are_capped_kept_apart_and_counted() -> None:
    renderer = LabelRenderer("otel", {})
    first, second = "p" * 70_000, "p" * 69_999 + "q"
    one = renderer.line_prefix("m", (("k8s.pod.name", first),), (), "")
    two = renderer.line_prefix("m", (("k8s.pod.name", second),), (), "")
    again = renderer.line_prefix("m", (("k8s.pod.name", first),), (), "")  # cached: not cut again
    values = [labels["k8s_pod_name"] for labels in _labels(f"{one}1\n{two}1\n")]
    assert [len(v) for v in values] == [MAX_VALUE_LENGTH, MAX_VALUE_LENGTH]
    assert values[0] != values[1]  # the hash of the whole value keeps them two series
    assert values[0].startswith("p" * 1000) and values[0][1007] == "\u2026"
    assert again == one
    assert renderer.take_truncated() == 2
    assert renderer.take_truncated() == 0
    short = "p" * MAX_VALUE_LENGTH
    assert renderer.render((("a", short),), ()) == f'{{a="{short}"}}'
    assert renderer.take_truncated() == 0


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_reserved_label_names_are_never_bare(naming: str) -> None:
    resource = {**gpu(0), **held_by("p"), "le": "0.5", "quantile": "0.9", "__name__": "evil"}
    resource.update({"k8s.pod.label.le": "x", "k8s.pod.label.quantile": "y"})
    renderer = LabelRenderer(naming, {"le": "c"})  # type: ignore[arg-type]
    labels = _labels("m" + renderer.render(tuple(resource.items()), ()) + " 1\n")[0]
    assert not {"le", "quantile", "__name__"} & set(labels)
    assert labels["key__name__"] == "evil"
    if naming == "otel":
        assert (labels["key_le"], labels["key_quantile"]) == ("0.5", "0.9")
    else:  # dcgm renders pod labels by their own key: `le` twice, joined in key order
        assert (labels["key_le"], labels["key_quantile"]) == ("x;0.5", "y;0.9")


def test_a_reserved_name_and_its_prefixed_twin_join_deterministically() -> None:
    resource = (("le", "a"), ("key_le", "b"))
    assert LabelRenderer("otel", {}).render(resource, ()) == '{key_le="b;a"}'


@pytest.mark.integration
@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_promtool_accepts_a_body_built_from_hostile_labels(naming: str) -> None:
    """The real promtool parses and lints a body holding every hostile label we know."""
    promtool = require_binary("promtool")
    resources = [
        gpu(i, **{**held_by(f"pod-{name}"), "k8s.pod.label.team": value})
        for i, (name, value) in enumerate(sorted(HOSTILE.items()))
    ]
    resources.append(gpu(90, **held_by("x" * 70_000)))
    resources.append(gpu(91, **held_by("le"), le="1", quantile="2", **{"k8s.pod.label.le": "3"}))
    text = _body(naming, resources, help_='GPU "busy" \\ time\nper\rcycle\x00.')
    check = subprocess.run(
        [promtool, "check", "metrics"],
        input=encode(text, 0).plain,
        capture_output=True,
        timeout=60,
        check=False,
    )
    # dcgm-exporter's own metric names are camelCase, which promtool's linter points out;
    # anything else (a parse error exits 1, any other lint) fails the test.
    lints = [
        line
        for line in check.stderr.decode().splitlines()
        if not (
            naming == "dcgm" and line.endswith("should be written in 'snake_case' not 'camelCase'")
        )
    ]
    assert check.returncode in ((0, 3) if naming == "dcgm" else (0,)), check.stderr
    assert (check.stdout, lints) == (b"", [])
    assert len(_labels(text)) == len(resources)
    assert semconv.HW_ID  # the resources carried real GPU identities


async def test_the_exporter_counts_cut_values_once_per_label_set(
    host: FakeHost, clock: FakeClock
) -> None:
    config = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0"})
    settings = nvml_settings("prometheus", Kind.EXPORTER, host.telemetry)
    exporter = PrometheusExporter(settings, config, clock=clock.monotonic, sleep=clock.sleep)
    await exporter.consume(batch(gpu(0, **held_by("n" * 70_000))))
    await exporter.refresh()
    await exporter.consume(batch(gpu(0, **held_by("n" * 70_000))))  # the same series again
    await exporter.refresh()
    body = exporter.body.plain.decode()
    assert "n" * 1008 not in body and "n" * 1007 in body
    series = [line for line in body.splitlines() if "n" * 1007 in line]
    assert len(series) == 8  # 7 metrics, one of them with two series (hw.errors by type)
    cut = counter(host.telemetry, "otelgpu_prometheus_truncated_label_values_total")
    assert cut == len(series)  # once per series, not again when the same series comes back
