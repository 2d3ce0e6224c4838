"""dcgm-exporter's `-d` (`--devices`) as the nvml receiver's settings: `naming: dcgm` then
serves the devices dcgm-exporter would (`receivers::nvml::dcgm_devices`, and `devices` for
`g`'s indexes), and the settings load in the real config loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.component.component import Kind
from otelgpu.config import load_config
from otelgpu.migrate.dcgm_flags import BY_NAME, Given, device_settings
from otelgpu.receivers.nvml.config import DcgmDevices, NvmlReceiverConfig
from otelgpu.service.builtins import builtin_registry


def given(value: str) -> Given:
    return Given(BY_NAME["devices"], value, "--devices")


def loaded(tmp_path: Path, nvml: dict[str, Any]) -> Any:
    """The nvml receiver's config as the real loader reads a pipeline with `nvml` settings."""
    path = tmp_path / "pipeline.yaml"
    pipeline = {
        "receivers": {"nvml": nvml},
        "exporters": {"prometheus": {"naming": "dcgm"}},
        "service": {"pipelines": {"metrics": {"receivers": ["nvml"], "exporters": ["prometheus"]}}},
    }
    path.write_text(yaml.safe_dump(pipeline))
    config = load_config([str(path)], builtin_registry())
    return next(iter(config.components[Kind.RECEIVER].values()))


@pytest.mark.parametrize(
    ("value", "devices", "choice", "said"),
    [
        ("f", "all", DcgmDevices.FLEX, "receivers::nvml::dcgm_devices: flex"),
        ("g", "all", DcgmDevices.GPUS, "receivers::nvml::dcgm_devices: gpus"),
        ("i", "all", DcgmDevices.INSTANCES, "receivers::nvml::dcgm_devices: instances"),
        ("g:0,2-4", [0, 2, 3, 4], DcgmDevices.GPUS,
         "receivers::nvml::dcgm_devices: gpus, receivers::nvml::devices: [0, 2, 3, 4]"),
        ("i:14", "all", DcgmDevices.INSTANCES,
         "receivers::nvml::dcgm_devices: instances; the IDs are DCGM's GPU-instance entity IDs, "
         "which NVML does not number: every MIG instance is served (drop the others in "
         "Prometheus)"),
    ],
)  # fmt: skip
def test_each_device_option_is_the_receivers_device_set(
    tmp_path: Path, value: str, devices: object, choice: DcgmDevices, said: str
) -> None:
    settings, text = device_settings(given(value))
    config = loaded(tmp_path, settings)

    assert (config.devices, config.dcgm_devices, text) == (devices, choice, said)


def test_dcgm_exporters_default_is_the_receivers_default() -> None:
    settings, _ = device_settings(given(BY_NAME["devices"].default))
    assert settings == {"dcgm_devices": DcgmDevices.FLEX.value}
    assert NvmlReceiverConfig().dcgm_devices is DcgmDevices.FLEX


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x:1", "--devices 'x:1': expected f, g[:IDS] or i[:IDS]"),
        ("g:1:2", "--devices 'g:1:2': expected f, g[:IDS] or i[:IDS]"),
        ("f:0", "--devices 'f:0': f takes no IDs (it serves every GPU or its instances)"),
        ("g:0,x", "--devices 'g:0,x': 'x' is not an ID or a range"),
        ("i:1-2-3", "--devices 'i:1-2-3': '1-2-3' is not an ID or a range"),
    ],
)
def test_what_dcgm_exporter_refuses_is_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        device_settings(given(value))
    assert str(caught.value) == message
