"""Device-ID forms real clusters send, and the resource keys they must meet."""

from __future__ import annotations

import pytest

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.devices import parse_device_id, resource_keys

U = "GPU-8f6c3a2e-1111-4b17-9c2e-5da9abb51763"
M = "MIG-1c2d3e4f-aaaa-5b6c-8d9e-0f1a2b3c4d5e"


@pytest.mark.parametrize(
    ("device_id", "id_type", "key", "form", "replica"),
    [
        (U, "auto", ("id", U), "gpu-uuid", False),
        (f"{U}::3", "auto", ("id", U), "gpu-uuid", True),  # time-slicing / MPS replica
        (M, "auto", ("id", M), "mig-uuid", False),
        (f"{M}::1", "auto", ("id", M), "mig-uuid", True),  # EKS MIG replicas
        (f"MIG-{U}/3/0", "auto", ("mig", U, "3", "0"), "mig-legacy", False),
        ("0", "auto", ("index", "0"), "index", False),
        ("12", "auto", ("index", "12"), "index", False),
        ("1::2", "auto", ("index", "1"), "index", True),
        ("nvidia0", "auto", ("name", "nvidia0"), "device-name", False),
        ("nvidia3/vgpu2", "auto", ("name", "nvidia3"), "device-name", True),  # GKE sharing
        ("nvidia0/gi2", "auto", ("mig-name", "nvidia0", "2"), "gke-mig", False),
        ("nvidia0/gi2/vgpu1", "auto", ("mig-name", "nvidia0", "2"), "gke-mig", True),
        ("custom-device-7", "auto", ("id", "custom-device-7"), "other", False),
        # A forced type reads every ID its way, whatever it looks like.
        ("7", "uuid", ("id", "7"), "other", False),
        ("GPU-x", "index", ("index", "GPU-x"), "index", False),
        ("gpu7", "device-name", ("name", "gpu7"), "device-name", False),
        # GKE's MIG form is still a MIG instance when device_id_type forces device names.
        ("nvidia0/gi2", "device-name", ("mig-name", "nvidia0", "2"), "gke-mig", False),
        ("nvidia1/gi3/vgpu2", "device-name", ("mig-name", "nvidia1", "3"), "gke-mig", True),
        (f"{U}::0", "uuid", ("id", U), "gpu-uuid", True),
        (" 0 ", "auto", ("index", "0"), "index", False),
    ],
)
def test_device_id_forms(device_id: str, id_type: str, key: tuple, form: str, replica: bool):
    ref = parse_device_id(device_id, id_type)
    assert ref is not None
    assert (ref.key, ref.form, ref.replica) == (key, form, replica)


@pytest.mark.parametrize("device_id", ["", "   "])
def test_empty_device_ids_are_ignored(device_id: str):
    assert parse_device_id(device_id) is None


def test_gpu_resource_answers_to_uuid_index_and_name():
    resource = {semconv.HW_ID: U, semconv.GPU_INDEX: "0", semconv.HW_NAME: "nvidia0"}
    assert resource_keys(resource, {}) == [("id", U), ("index", "0"), ("name", "nvidia0")]


def test_mig_resource_answers_only_to_mig_keys():
    resource = {
        semconv.HW_ID: M,
        semconv.HW_PARENT: U,
        semconv.GPU_INDEX: "0",  # even if it carried its parent's index and name
        semconv.HW_NAME: "nvidia0",
        semconv.MIG_GPU_INSTANCE_ID: "3",
        semconv.MIG_COMPUTE_INSTANCE_ID: "0",
    }
    keys = resource_keys(resource, {U: "nvidia5"})
    assert keys == [("id", M), ("mig", U, "3", "0"), ("mig-name", "nvidia5", "3")]
    assert ("index", "0") not in keys


def test_resource_without_gpu_identity_has_no_keys():
    assert resource_keys({"service.name": "otelgpu"}, {}) == []


def test_device_name_is_the_device_file_minor_not_the_nvml_index():
    # NVML index 0 is /dev/nvidia1 on this node: GKE's device plugin calls it "nvidia1".
    resource = {
        semconv.HW_ID: U,
        semconv.GPU_INDEX: "0",
        semconv.HW_NAME: "nvidia0",
        semconv.GPU_MINOR: "1",
    }
    keys = resource_keys(resource, {})
    assert ("name", "nvidia1") in keys and ("name", "nvidia0") not in keys


def test_gke_mig_form_names_the_parent_by_its_device_file():
    parent = {semconv.HW_ID: U, semconv.HW_NAME: "nvidia0", semconv.GPU_MINOR: "4"}
    mig = {
        semconv.HW_ID: M,
        semconv.HW_PARENT: U,
        semconv.HW_NAME: "nvidia0/gi3",
        semconv.GPU_MINOR: "4",
        semconv.MIG_GPU_INSTANCE_ID: "3",
        semconv.MIG_COMPUTE_INSTANCE_ID: "0",
    }
    from otelgpu.pdata.model import ResourceMetrics
    from otelgpu.processors.k8s_attributes.processor import _mig_parents

    _, names = _mig_parents((ResourceMetrics(resource=parent, metrics=()),))
    assert names == {U: "nvidia4"}
    assert ("mig-name", "nvidia4", "3") in resource_keys(mig, names)
