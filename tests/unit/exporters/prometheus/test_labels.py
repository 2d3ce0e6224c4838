"""Label sets: precedence, dcgm names, collisions, escaping, and no duplicate series ever."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.exporters.prometheus.labels import LabelRenderer
from otelgpu.exporters.prometheus.render import encode, render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gpu, held_by
from tests.unit.exporters.prometheus.translators import make_translator

# C0 but newline, DEL, C1 and U+2028/9 as UTF-8: what no label value may carry.
_UNSAFE_BYTES = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")
_LABEL = re.compile(r'([^{=,]+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, str]:
    return dict(_LABEL.findall(text))


def render(naming: str, resource: dict, attributes: dict | None = None, **const: str) -> dict:
    renderer = LabelRenderer(naming, const)  # type: ignore[arg-type]
    return parse(renderer.render(tuple(resource.items()), tuple((attributes or {}).items())))


def test_otel_naming_turns_every_attribute_into_a_sanitized_label() -> None:
    labels = render("otel", {**gpu(0), **held_by("train-0"), "container.env.TEAM": "vision"})
    assert labels["k8s_pod_name"] == "train-0"
    assert labels["hw_id"].startswith("GPU-")
    assert labels["nvidia_gpu_index"] == "0"
    assert labels["container_env_TEAM"] == "vision"


def test_dcgm_naming_uses_dcgm_exporter_labels() -> None:
    resource = {
        **gpu(1),
        **held_by("train-0", "research", "main"),
        "container.env.TEAM": "vision",
        "container.label.org.team": "cv",
        "k8s.pod.annotation.example.com/owner": "ana",
        "k8s.pod.label.app.kubernetes.io/name": "trainer",
    }
    labels = render("dcgm", resource)
    assert labels["gpu"] == "1"
    assert labels["UUID"] == resource[semconv.HW_ID]
    assert labels["device"] == "nvidia1"
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["Hostname"] == "gpu-node-1"
    assert labels["pci_bus_id"] == resource[semconv.GPU_PCI_BUS_ID]
    assert labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15"
    assert (labels["pod"], labels["namespace"], labels["container"]) == (
        "train-0",
        "research",
        "main",
    )
    assert labels["env_TEAM"] == "vision"
    assert labels["label_org_team"] == "cv"
    assert labels["annotation_example_com_owner"] == "ana"
    # Pod labels: the sanitized key itself, as dcgm-exporter's pod-label option renders them.
    assert labels["app_kubernetes_io_name"] == "trainer"


def test_dcgm_mig_instance_reports_its_parent_gpu_as_uuid() -> None:
    resource = {
        **gpu(0),
        semconv.HW_ID: "MIG-1c2d",
        semconv.HW_PARENT: "GPU-parent",
        semconv.MIG_PROFILE: "1g.10gb",
        semconv.MIG_GPU_INSTANCE_ID: 7,
    }
    labels = render("dcgm", resource)
    assert labels["UUID"] == "GPU-parent"
    assert labels["GPU_I_PROFILE"] == "1g.10gb"
    assert labels["GPU_I_ID"] == "7"
    assert "hw_id" not in labels  # dcgm-exporter's labels only
    renderer = LabelRenderer("dcgm", {})
    info = parse(renderer.info_prefix("hw_gpu_info", tuple(resource.items())))
    assert info["hw_id"] == "MIG-1c2d"  # the instance's own UUID: on its info series
    assert (info["UUID"], info["GPU_I_ID"]) == ("GPU-parent", "7")


def test_datapoint_beats_resource_beats_const_label() -> None:
    labels = render(
        "otel",
        {"team": "from-resource", "zone": "r"},
        {"team": "from-point"},
        team="c",
        zone="c",
        cluster="c1",
    )
    assert labels == {"team": "from-point", "zone": "r", "cluster": "c1"}


def test_colliding_keys_join_values_in_key_order() -> None:
    labels = render("otel", {"app.name": "b", "app_name": "a", "app-name": "c"})
    # keys sort as app-name < app.name < app_name
    assert labels == {"app_name": "c;b;a"}


def test_dcgm_names_are_authoritative_in_a_collision() -> None:
    labels = render(
        "dcgm", {**gpu(3), "k8s.pod.label.gpu": "evil", "k8s.pod.label.pod": "x", **held_by("p")}
    )
    assert labels["gpu"] == "3"
    assert labels["pod"] == "p"


def test_values_are_escaped_and_empty_values_left_out() -> None:
    renderer = LabelRenderer("otel", {})
    text = renderer.render((("a", 'q"b\\s\nn'), ("empty", ""), ("flag", True), ("n", 3)), ())
    assert text == '{a="q\\"b\\\\s\\nn",flag="true",n="3"}'


_keys = st.one_of(
    st.text(alphabet="ab._-/:0_ Ü", min_size=0, max_size=6),
    st.sampled_from(
        [
            "hw.id",
            "gpu",
            "k8s.pod.label.gpu",
            "__name__",
            "container.env.A.B",
            "container.env.A_B",
            "le",
            "quantile",
            "k8s.pod.label.le",
            "key_le",
        ]
    ),
)
_values = st.one_of(
    st.text(max_size=5),
    st.text(alphabet='a\r\x0b\x0c\x00\x85\u2028\ud800\\"\n', max_size=5),
    st.integers(-3, 3),
    st.booleans(),
)
_attrs = st.dictionaries(_keys, _values, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["otel", "dcgm"]),
    st.lists(st.tuples(_attrs, st.lists(_attrs, max_size=3)), min_size=1, max_size=4),
)
def test_no_duplicate_series_and_only_valid_label_names(naming: str, resources: list) -> None:
    batch = tuple(
        ResourceMetrics(
            resource=resource,
            metrics=(
                Metric(
                    name="hw.gpu.utilization",
                    unit="1",
                    description="u",
                    kind=MetricKind.GAUGE,
                    points=tuple(
                        NumberDataPoint(attributes=a, time_unix_nano=1, value=0.5) for a in points
                    ),
                ),
            ),
        )
        for resource, points in resources
    )
    store = SeriesStore()
    make_translator(naming, const_labels={"cluster": "c"}).ingest(store, batch, now=1.0)
    text, count = render_text(store.families.values())
    body = encode(text, count).plain  # always encodable: no lone surrogate survives
    assert _UNSAFE_BYTES.search(body) is None
    seen = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in seen, f"duplicate series {key}"
            seen.add(key)
            for name in sample.labels:
                assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) and not name.startswith("__")
                assert name not in ("le", "quantile")
    assert len(seen) == count
