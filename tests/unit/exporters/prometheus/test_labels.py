"""Label sets: precedence, dcgm names, collisions, escaping, values cut to the maximum length,
the renderer's cache across generations, and no duplicate series ever."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.exporters.prometheus.labels import MAX_VALUE_LENGTH, LabelRenderer
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


def _text(naming: str, resource: dict, attributes: dict | None = None, drop: str = "") -> str:
    renderer = LabelRenderer(naming, {})  # type: ignore[arg-type]
    return renderer.render(tuple(resource.items()), tuple((attributes or {}).items()), drop)


def _info(naming: str, resource: dict) -> str:
    """The label text of a device's info series."""
    renderer = LabelRenderer(naming, {})  # type: ignore[arg-type]
    return renderer.info_prefix("i", tuple(resource.items()))[1:-1]


def test_no_labels_render_as_nothing() -> None:
    assert _text("otel", {}) == ""
    assert _text("otel", {"empty": ""}) == ""


def test_labels_are_sorted_by_name() -> None:
    assert _text("otel", {"b": "2", "c": "3", "a": "1"}) == '{a="1",b="2",c="3"}'


def test_the_dropped_key_is_left_out_from_any_source() -> None:
    renderer = LabelRenderer("otel", {"split": "c"})
    assert renderer.render((("split", "r"), ("a", "1")), (("split", "p"),), "split") == '{a="1"}'
    assert renderer.render((("a", "1"),), (), "") == '{a="1",split="c"}'


def test_values_of_other_types_render_as_text() -> None:
    assert _text("otel", {"on": True, "off": False, "n": 0, "x": 1.5}) == (
        '{n="0",off="false",on="true",x="1.5"}'
    )


def test_nothing_is_dropped_unless_asked() -> None:
    assert LabelRenderer("otel", {}).render((("XX", "1"),), ()) == '{XX="1"}'


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


def test_reserved_names_get_the_key_prefix_in_both_namings() -> None:
    assert _text("otel", {"le": "1", "quantile": "q"}) == '{key_le="1",key_quantile="q"}'
    assert _text("dcgm", {"k8s.pod.label.le": "1"}) == '{key_le="1"}'


def test_dcgm_prefix_forms() -> None:
    resource = {
        "container.env.TEAM.X": "e",
        "k8s.pod.label.app.kubernetes.io/name": "n",
        "container.env.": "bare",  # the prefix alone: a plain key
        "k8s.pod.label.": "bare2",
    }
    assert _text("dcgm", resource) == (
        '{app_kubernetes_io_name="n",container_env_="bare",env_TEAM_X="e",k8s_pod_label_="bare2"}'
    )


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


def test_dcgm_mig_labels_need_a_parent() -> None:
    # Without hw.parent, hw.id is the GPU's own UUID; with it, UUID is the parent's.
    assert _text("dcgm", {"hw.id": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _text("dcgm", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _info("dcgm", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == (
        '{UUID="GPU-1",hw_id="MIG-1"}'
    )
    assert _info("dcgm", {"hw.id": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _text("otel", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == (
        '{hw_id="MIG-1",hw_parent="GPU-1"}'
    )


def test_the_parent_uuid_of_a_mig_instance_beats_a_colliding_pod_label() -> None:
    resource = {"hw.id": "MIG-1", "hw.parent": "GPU-1", "k8s.pod.label.UUID": "x"}
    assert _text("dcgm", resource) == '{UUID="GPU-1"}'


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


def test_a_dcgm_name_beats_colliding_plain_keys_whatever_their_order() -> None:
    # `k8s.pod.label.pod` becomes `pod`, dcgm's name for k8s.pod.name, and sorts before it:
    # the authoritative value wins anyway, and is not joined with the other.
    resource = {"k8s.pod.label.pod": "x", "k8s.pod.name": "p", "k8s.pod.label.gpu": "y"}
    assert _text("dcgm", resource) == '{gpu="y",pod="p"}'


def test_colliding_plain_keys_all_join_but_only_equals_join() -> None:
    assert _text("otel", {"a.b": "1", "a_b": "2"}) == '{a_b="1;2"}'
    assert _text("otel", {"a_b": "2", "a.b": "1"}) == '{a_b="1;2"}'


def test_a_plain_key_is_not_authoritative_in_dcgm_naming() -> None:
    assert _text("dcgm", {"pod": "x", "k8s.pod.name": "p"}) == '{pod="p"}'


def test_values_are_escaped_and_empty_values_left_out() -> None:
    renderer = LabelRenderer("otel", {})
    text = renderer.render((("a", 'q"b\\s\nn'), ("empty", ""), ("flag", True), ("n", 3)), ())
    assert text == '{a="q\\"b\\\\s\\nn",flag="true",n="3"}'


LONG = "x" * (MAX_VALUE_LENGTH + 500)


@pytest.mark.parametrize(
    ("value", "escaped"),
    [("a\\b", "a\\\\b"), ('a"b', 'a\\"b'), ("a\nb", "a\\nb"), ("plain", "plain")],
)
def test_each_escaped_character_alone_is_escaped(value: str, escaped: str) -> None:
    assert _text("otel", {"v": value}) == f'{{v="{escaped}"}}'


def test_a_value_of_exactly_the_maximum_length_is_not_cut() -> None:
    renderer = LabelRenderer("otel", {})
    value = "v" * MAX_VALUE_LENGTH
    assert renderer.render((("k", value),), ()) == f'{{k="{value}"}}'
    assert renderer.take_truncated() == 0


def test_a_cut_value_is_exactly_the_maximum_length_and_ends_with_its_hash() -> None:
    renderer = LabelRenderer("otel", {})
    value = "v" * (MAX_VALUE_LENGTH + 1)
    cut = _only_value(renderer.render((("k", value),), ()))
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    assert len(cut) == MAX_VALUE_LENGTH
    assert cut == "v" * (MAX_VALUE_LENGTH - 17) + "\u2026" + digest
    assert renderer.take_truncated() == 1
    assert renderer.take_truncated() == 0  # taken


def test_a_long_value_with_a_lone_surrogate_is_cut_and_rendered() -> None:
    renderer = LabelRenderer("otel", {})
    cut = _only_value(renderer.render((("k", "\ud800" + "v" * 2000),), ()))
    assert cut.startswith("\ufffdv") and len(cut) == MAX_VALUE_LENGTH
    cut.encode("utf-8")  # the body can be encoded


def _only_value(text: str) -> str:
    assert text.startswith('{k="') and text.endswith('"}'), text
    return text[4:-2]


def _renders_anew(renderer: LabelRenderer, resource: tuple) -> bool:
    """Whether `line_prefix` rendered the series again (a cut value is counted only then)."""
    renderer.take_truncated()
    renderer.line_prefix("m", resource, (), "")
    return renderer.take_truncated() == 1


def test_a_series_used_in_every_generation_stays_cached() -> None:
    renderer = LabelRenderer("otel", {})
    resource = (("pod", LONG),)
    assert _renders_anew(renderer, resource)
    assert not _renders_anew(renderer, resource)
    for _ in range(3):
        renderer.rotate()
        assert not _renders_anew(renderer, resource)  # used since the previous rotation


def test_rotate_retires_a_series_unused_for_a_whole_generation() -> None:
    renderer = LabelRenderer("otel", {})
    resource = (("pod", LONG),)
    assert _renders_anew(renderer, resource)
    renderer.rotate()
    renderer.rotate()  # a whole generation without it
    assert _renders_anew(renderer, resource)


def test_a_cached_prefix_is_the_rendered_one() -> None:
    renderer = LabelRenderer("otel", {"cluster": "c1"})
    resource = (("k8s.pod.name", "p"),)
    first = renderer.line_prefix("gpu_util", resource, (("gpu", "0"),), "")
    renderer.rotate()
    again = renderer.line_prefix("gpu_util", resource, (("gpu", "0"),), "")
    assert first == again == 'gpu_util{cluster="c1",gpu="0",k8s_pod_name="p"} '


def test_the_label_name_memo_stays_bounded_and_right() -> None:
    """Keys a peer sends are unbounded: the memo of label names is cleared when full, and a
    name looked up after that is still the right one."""
    from otelgpu.exporters.prometheus.labels import _NAMES_KEPT

    renderer = LabelRenderer("otel", {})
    for n in range(_NAMES_KEPT + 10):
        assert renderer.render((), ((f"k.{n}", "v"),)) == f'{{k_{n}="v"}}'
    assert len(renderer._names) <= _NAMES_KEPT
    assert renderer.render((), (("le", "1"),)) == '{key_le="1"}'


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
