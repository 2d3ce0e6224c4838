"""Device-ID parsing and resource keys at the corners mutation testing showed no test held
(docs/dev/mutation.md)."""

from __future__ import annotations

import pytest

from otelgpu.pdata import semconv
from otelgpu.processors.k8s_attributes.devices import (
    parse_device_id,
    parse_dra_device,
    resource_keys,
)

U = "GPU-8f6c3a2e-1111-4b17-9c2e-5da9abb51763"
M = "MIG-1c2d3e4f-aaaa-5b6c-8d9e-0f1a2b3c4d5e"


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


def test_a_gpu_answers_to_each_identity_it_has():
    assert resource_keys({semconv.GPU_INDEX: "2"}, {}) == [("index", "2")]
    assert resource_keys({semconv.HW_NAME: "nvidia2"}, {}) == [("name", "nvidia2")]
    assert resource_keys({semconv.HW_ID: U}, {}) == [("id", U)]


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


def test_cdi_names_are_read_only_when_the_kubelet_sent_neither_driver_nor_device() -> None:
    cdi = ("k8s.gpu.nvidia.com/device=gpu-3",)
    assert parse_dra_device("", "", cdi)[0] == ("minor", "3")  # a kubelet before 1.31
    # A newer kubelet that names the driver but no device: the CDI name is not a second source.
    key, reason = parse_dra_device("gpu.nvidia.com", "", cdi)
    assert key is None and reason
    key, _ = parse_dra_device("", "gpu-5", cdi)
    assert key != ("minor", "3")


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
