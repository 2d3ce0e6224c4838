"""Device-ID forms real clusters send, and the resource keys they must meet."""

from __future__ import annotations

import pytest

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.devices import (
    parse_device_id,
    resource_keys,
)

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


@pytest.mark.parametrize(
    ("device_id", "replica_id"),
    [
        (f"{U}::3", "3"),
        ("nvidia3/vgpu2", "2"),
        ("nvidia0/gi2/vgpu11", "11"),
        (U, ""),
        ("nvidia0/gi2", ""),
    ],
)
def test_the_replica_id_is_the_number_of_the_sharing_suffix(device_id: str, replica_id: str):
    ref = parse_device_id(device_id)
    assert ref is not None
    assert (ref.replica_id, ref.replica) == (replica_id, bool(replica_id))


@pytest.mark.parametrize(
    ("device_id", "id_type", "key", "form"),
    [
        # The legacy MIG form is a UUID form: read as such under `uuid`, not under the others.
        (f"MIG-{U}/3/0", "uuid", ("mig", U, "3", "0"), "mig-legacy"),
        (f"MIG-{U}/3/0", "index", ("index", f"MIG-{U}/3/0"), "index"),
        (f"MIG-{U}/3/0", "device-name", ("name", f"MIG-{U}/3/0"), "device-name"),
        # GKE's MIG form is a device-name form: not read as such under `uuid` or `index`.
        ("nvidia0/gi2", "uuid", ("id", "nvidia0/gi2"), "other"),
        ("nvidia0/gi2", "index", ("index", "nvidia0/gi2"), "index"),
        # A forced `uuid` still names the UUID's kind.
        (M, "uuid", ("id", M), "mig-uuid"),
        (U, "uuid", ("id", U), "gpu-uuid"),
        # `auto`: digits are an index, `nvidia<n>` a name, anything else an ID.
        ("nvidia", "auto", ("id", "nvidia"), "other"),
        ("nvidia0x", "auto", ("id", "nvidia0x"), "other"),
        ("x7", "auto", ("id", "x7"), "other"),
        ("MIG-GPU-x/1", "auto", ("id", "MIG-GPU-x/1"), "mig-uuid"),
    ],
)
def test_forms_under_each_device_id_type(device_id: str, id_type: str, key: tuple, form: str):
    ref = parse_device_id(device_id, id_type)
    assert ref is not None
    assert (ref.key, ref.form) == (key, form)


@pytest.mark.parametrize(
    ("device_id", "key"),
    [
        (f"MIG-{U}/3/0", ("mig", U, "3", "0")),
        ("nvidia0/gi2", ("mig-name", "nvidia0", "2")),
        ("nvidia0/gi2/vgpu1", ("mig-name", "nvidia0", "2")),
    ],
)
def test_the_default_device_id_type_is_auto(device_id: str, key: tuple):
    ref = parse_device_id(device_id)
    assert ref is not None and ref.key == key


@pytest.mark.parametrize("device_id", ["", "   "])
def test_empty_device_ids_are_ignored(device_id: str):
    assert parse_device_id(device_id) is None


def test_gpu_resource_answers_to_uuid_index_and_name():
    resource = {semconv.HW_ID: U, semconv.GPU_INDEX: "0", semconv.HW_NAME: "nvidia0"}
    assert resource_keys(resource, {}) == [("id", U), ("index", "0"), ("name", "nvidia0")]


def test_a_gpu_answers_to_each_identity_it_has():
    assert resource_keys({semconv.GPU_INDEX: "2"}, {}) == [("index", "2")]
    assert resource_keys({semconv.HW_NAME: "nvidia2"}, {}) == [("name", "nvidia2")]
    assert resource_keys({semconv.HW_ID: U}, {}) == [("id", U)]


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


def _mig(**extra: str) -> dict[str, str]:
    return {semconv.HW_ID: M, semconv.HW_PARENT: U, **extra}


def test_a_mig_instance_without_its_compute_instance_has_no_legacy_key():
    keys = resource_keys(_mig(**{semconv.MIG_GPU_INSTANCE_ID: "3"}), {U: "nvidia5"})
    assert keys == [("id", M), ("mig-name", "nvidia5", "3")]


def test_a_mig_instance_without_its_gpu_instance_has_only_its_uuid():
    keys = resource_keys(_mig(**{semconv.MIG_COMPUTE_INSTANCE_ID: "0"}), {U: "nvidia5"})
    assert keys == [("id", M)]


def test_a_mig_instance_falls_back_to_its_own_name_when_the_parent_is_not_in_the_batch():
    resource = _mig(**{semconv.MIG_GPU_INSTANCE_ID: "1", semconv.HW_NAME: "nvidia2"})
    assert resource_keys(resource, {}) == [("id", M), ("mig-name", "nvidia2", "1")]
    assert resource_keys(_mig(**{semconv.MIG_GPU_INSTANCE_ID: "1"}), {}) == [("id", M)]


def test_a_mig_instance_without_its_placement_start_has_no_placement_key() -> None:
    mig = {
        semconv.HW_ID: "MIG-1",
        semconv.HW_PARENT: "GPU-1",
        semconv.GPU_MINOR: "2",
        semconv.MIG_GPU_INSTANCE_ID: "1",
        semconv.MIG_COMPUTE_INSTANCE_ID: "0",
    }
    assert not [k for k in resource_keys(mig, {}) if k[0] == "mig-placement"]
    placed = {**mig, semconv.MIG_PLACEMENT_START: "4"}
    assert ("mig-placement", "2", "4") in resource_keys(placed, {})


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
