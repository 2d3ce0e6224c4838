"""S4: whatever the kubelet answers, building the snapshot and processing never raise."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes.devices import parse_device_id, resource_keys
from otelgpu.processors.k8s_attributes.pod_resources import (
    ContainerAllocation,
    DeviceAllocation,
    PodAllocation,
)
from otelgpu.processors.k8s_attributes.snapshot import ResourceFilter, build_snapshot
from tests.fakes import FakeClock
from tests.unit.processors.k8s_attributes.fakes import FakePodResources, make_processor

ID_PARTS = st.sampled_from(["GPU-", "MIG-", "MIG-GPU-", "nvidia", "::", "/", "gi", "vgpu", "0"])
device_ids = st.one_of(
    st.text(max_size=40), st.lists(st.one_of(ID_PARTS, st.text(max_size=4))).map("".join)
)
resource_names = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-2g.20gb", "x/y", ""])
allocations = st.builds(
    DeviceAllocation, resource_names, st.lists(device_ids, max_size=4).map(tuple)
)
containers = st.builds(
    ContainerAllocation, st.text(max_size=8), st.lists(allocations, max_size=3).map(tuple)
)
pods = st.builds(
    PodAllocation,
    st.text(max_size=8),
    st.text(max_size=8),
    st.lists(containers, max_size=3).map(tuple),
)
attr_values = st.one_of(device_ids, st.integers(), st.booleans(), st.floats(allow_nan=True))
resources = st.dictionaries(
    st.sampled_from(
        [
            semconv.HW_ID,
            semconv.HW_PARENT,
            semconv.HW_NAME,
            semconv.GPU_INDEX,
            semconv.MIG_GPU_INSTANCE_ID,
            semconv.MIG_COMPUTE_INSTANCE_ID,
            semconv.PROCESS_PID,
            semconv.K8S_NAMESPACE_NAME,
        ]
    ),
    attr_values,
)


@given(device_ids, st.sampled_from(["auto", "uuid", "index", "device-name"]))
def test_any_device_id_parses_or_is_skipped(device_id: str, id_type: str):
    ref = parse_device_id(device_id, id_type)
    assert ref is None or (ref.key and ref.form)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(pods, max_size=6),
    st.one_of(st.none(), st.lists(allocations, max_size=4)),
    st.lists(resources, max_size=6),
    st.sampled_from(["auto", "uuid", "index", "device-name"]),
)
def test_any_answer_and_batch_are_handled(pod_list, allocatable, batch_resources, id_type):
    wanted = ResourceFilter(["nvidia.com/gpu", "nvidia.com/mig-*"])
    snap = build_snapshot(pod_list, allocatable, wanted=wanted, id_type=id_type)
    for resource in batch_resources:
        snap.lookup(resource_keys(resource, {}))
    processor = make_processor(
        SelfTelemetry(), FakePodResources(), FakeClock(), device_id_type=id_type
    )
    asyncio.run(
        processor._install(tuple(pod_list), None if allocatable is None else tuple(allocatable))
    )
    assert processor.snapshot is not None
    batch = tuple(ResourceMetrics(resource=r, metrics=()) for r in batch_resources)
    out = processor.process(batch)
    assert len(out) >= len(batch)
