"""S4: a hypothesis fuzz run over runtime-response handling: no input crashes it.

Arbitrary labels, env entries, annotations, OCI spec JSON (valid, malformed, wrongly typed),
docker listings and containerd protobuf bytes go through the same code as real answers.
Beyond "no crash": no secret-like or unsafe key, no credential-like value and no over-long
value ever leaves, and no resource gains more than `max_attributes`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.secret_keys import is_safe_key
from otelgpu.config.types import KeyFilter
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.container_env import containerd as containerd_mod
from otelgpu.processors.container_env import docker as docker_mod
from otelgpu.processors.container_env.keys import KeySelector, looks_secret, refusal
from otelgpu.processors.container_env.runtime import decode_oci_spec
from tests.fakes import FakeHost
from tests.unit.processors.container_env.fake_runtime import FakeRuntime
from tests.unit.processors.container_env.helpers import EVERY_KEY, gpu, make_processor

pb = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
text = st.text(max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
KINDS = st.sampled_from(["container", "sandbox", "", "weird"])
KEYS = (
    st.sampled_from(
        ["TEAM", "HF_TOKEN", "app", "owner", "x.key", "POD", "MLFLOW_RUN", "DB_PASS", "TE\u0410M"]
    )
    | text
)
# Values that mix credential shapes with noise, so the value checks see near misses too.
VALUES = text | st.builds(
    "".join,
    st.lists(
        st.sampled_from(
            ["https://", "u:p@", "eyJhbGc.", "eyJzdWI.", "-----BEGIN X-----", "{", "}", "[1]"]
        )
        | st.text(alphabet="aB3/+_-=:@.", max_size=8),
        max_size=6,
    ),
)
PREFIXES = (
    semconv.CONTAINER_ENV_PREFIX,
    semconv.CONTAINER_LABEL_PREFIX,
    semconv.POD_LABEL_PREFIX,
    semconv.POD_ANNOTATION_PREFIX,
)
ids = st.sampled_from(["a", "b", "c", "s1", "s2"])


@st.composite
def raw_specs(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        return json.dumps(draw(json_values)).encode()
    env = draw(
        st.lists(st.one_of(text, st.tuples(KEYS, text).map("=".join), st.integers()), max_size=8)
    )
    annotations = draw(st.dictionaries(KEYS, text | st.integers(), max_size=5))
    spec: dict[str, Any] = {"process": {"env": env}, "annotations": annotations}
    if choice == 3:
        spec["annotations"]["io.kubernetes.cri.container-type"] = draw(KINDS)
        spec["annotations"]["io.kubernetes.cri.sandbox-id"] = draw(ids)
    return json.dumps(spec).encode()


@st.composite
def labels(draw: st.DrawFn) -> dict[str, str]:
    out = draw(st.dictionaries(KEYS, text, max_size=6))
    for key in (
        "io.kubernetes.pod.namespace",
        "io.kubernetes.pod.name",
        "io.kubernetes.container.name",
        "io.cri-containerd.kind",
    ):
        if draw(st.booleans()):
            out[key] = draw(st.sampled_from(["ml", "p", "c", "sandbox", "container", ""]))
    return out


containers = st.lists(
    st.tuples(ids, labels(), raw_specs(), st.floats(0, 10), st.sampled_from(["1", "2"])),
    max_size=6,
)
resources = st.lists(
    st.dictionaries(
        st.sampled_from(
            ["container.id", "k8s.namespace.name", "k8s.pod.name", "k8s.container.name"]
        ),
        st.sampled_from(["a", "b", "s1", "ml", "p", "c", ""]) | st.integers(),
        max_size=4,
    ),
    max_size=4,
)


@FUZZ
@given(raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_decode_oci_spec_never_raises(raw: bytes) -> None:
    spec = decode_oci_spec(raw)
    assert all(isinstance(e, str) for e in spec.env)
    assert all(isinstance(v, str) for v in spec.annotations.values())


@FUZZ
@given(items=st.lists(json_values, max_size=5))
def test_docker_listing_never_raises(items: list[Any]) -> None:
    for item in items:
        ref = docker_mod._ref(item)
        assert ref is None or (ref.id and all(isinstance(v, str) for v in ref.labels.values()))


@FUZZ
@given(raw=st.binary(max_size=300))
def test_containerd_record_bytes_never_crash_the_decoder(raw: bytes) -> None:
    try:
        container = pb.Container.FromString(raw)
    except Exception:
        return  # list_containers turns an undecodable answer into RuntimeUnavailable
    containerd_mod._ref(container, running=True)


@FUZZ
@given(entries=containers, batch=resources, allow=st.booleans(), cap=st.integers(1, 5))
def test_arbitrary_runtime_answers_through_the_processor(
    entries: list[tuple[str, dict[str, str], bytes, float, str]],
    batch: list[dict[str, Any]],
    allow: bool,
    cap: int,
) -> None:
    async def run() -> tuple[list[ResourceMetrics], list[ResourceMetrics]]:
        rt = FakeRuntime()
        for cid, lbls, raw, created, rev in entries:
            rt.add(cid, lbls, raw_spec=raw, created=created, revision=rev)
        everything = {"include": ["*"]}
        telemetry = SelfTelemetry()
        proc = make_processor(
            telemetry,
            [(rt, True)],
            env=EVERY_KEY,
            labels=everything,
            pod_labels=everything,
            annotations=EVERY_KEY,
            allow_secret_like_keys=allow,
            max_value_length=8,
            max_attributes=cap,
        )
        await proc.start(FakeHost(telemetry))
        await proc.refresh()
        given_in = [gpu(1, **r) for r in batch]
        out = list(proc.process(tuple(given_in)))
        await proc.shutdown()
        return given_in, out

    given_in, out = asyncio.run(run())
    assert len(out) == len(given_in)
    for before, after in zip(given_in, out, strict=True):
        exported = {
            key.removeprefix(prefix): value
            for key, value in after.resource.items()
            if key not in before.resource
            for prefix in PREFIXES
            if key.startswith(prefix)
        }
        assert len(exported) <= cap
        assert all(isinstance(v, str) and len(v) <= 8 for v in exported.values())
        assert allow or not any(looks_secret(key) for key in exported)
        assert all(is_safe_key(key) for key in exported)


@FUZZ
@given(pairs=st.lists(st.tuples(KEYS, VALUES), max_size=12), allow=st.booleans())
def test_selector_keeps_only_pairs_with_nothing_to_refuse(
    pairs: list[tuple[str, str]], allow: bool
) -> None:
    selector = KeySelector(
        "env", KeyFilter(include=["*"]), allow_secret_like_keys=allow, max_value_length=1 << 16
    )
    got = selector.select(pairs)
    for key, value in got.values.items():
        assert refusal(key, value, allow_secret_like_keys=allow) is None
        assert (key, value) in pairs
    for key in got.refused:
        assert getattr(key, "reason", None)
