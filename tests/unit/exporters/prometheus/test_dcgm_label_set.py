"""The label set of a held GPU's series in `naming: dcgm`, label for label: dcgm-exporter's
names for the device and its holder, and the business labels behind its prefixes (what its
dashboards and `--kubernetes-enable-pod-labels` users filter on)."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus import dcgm
from otelgpu.pdata import semconv
from tests.unit.exporters.prometheus.batches import batch, gpu, held_by
from tests.unit.exporters.prometheus.test_dcgm_labels import labels_of, served


def test_a_held_gpus_series_carries_dcgm_exporters_labels_and_its_business_labels() -> None:
    attributes = gpu(
        0,
        **held_by("train-0", namespace="ml", container="trainer"),
        **{
            f"{semconv.CONTAINER_ENV_PREFIX}TEAM": "vision",
            f"{semconv.CONTAINER_LABEL_PREFIX}com.acme.cost-center": "cc-7",
            f"{semconv.POD_ANNOTATION_PREFIX}acme.io/owner": "ana",
            f"{semconv.POD_LABEL_PREFIX}app.kubernetes.io/name": "trainer",
        },
    )
    (line,) = served(batch(attributes))["DCGM_FI_DEV_GPU_TEMP"]
    assert labels_of(line) == {
        "gpu": "0",
        "UUID": "GPU-00000000-aaaa-bbbb-cccc-000000000000",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "gpu-node-1",
        "pci_bus_id": "00000000:10:00.0",
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "pod": "train-0",
        "namespace": "ml",
        "container": "trainer",
        "env_TEAM": "vision",
        "label_com_acme_cost_center": "cc-7",
        "annotation_acme_io_owner": "ana",
        "app_kubernetes_io_name": "trainer",
    }


def test_static_facts_are_named_as_dcgm_exporter_names_them() -> None:
    names = dcgm.label_names()
    assert names[semconv.HW_SERIAL_NUMBER] == "DCGM_FI_DEV_SERIAL"
    assert names[semconv.HW_FIRMWARE_VERSION] == "DCGM_FI_DEV_VBIOS_VERSION"


def test_by_default_the_labels_are_those_of_dcgm_exporters_latest_release() -> None:
    names = dcgm.label_names()
    assert names[semconv.HOST_NAME] == "Hostname"  # HEAD's `hostname` is an option
    assert semconv.K8S_POD_UID not in names  # as without --kubernetes-enable-pod-uid


def test_a_wrong_hostname_spelling_says_which_are_allowed() -> None:
    with pytest.raises(ValueError, match=r"^hostname label must be one of Hostname, hostname$"):
        dcgm.label_names("HOSTNAME")
