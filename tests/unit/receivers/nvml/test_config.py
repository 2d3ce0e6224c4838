"""The nvml receiver's config model: defaults, metric switches, the simulated block."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from otelgpu.receivers.nvml.config import Backend, NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import CATALOG

ROOT = Path(__file__).parents[4]


def test_defaults() -> None:
    config = NvmlReceiverConfig()
    assert config.collection_interval == 10.0
    assert config.devices == "all"
    assert config.processes is False
    assert config.host_proc == "/proc"
    assert config.backend is Backend.AUTO
    assert config.enabled_metrics() == {s.name for s in CATALOG if s.enabled}
    assert config.use_simulated(lambda: False) is False  # auto without a block: real NVML


def test_metric_switches_override_defaults() -> None:
    config = NvmlReceiverConfig.model_validate(
        {"metrics": {"nvidia.gpu.power.limit": {"enabled": True}, "hw.power": {"enabled": False}}}
    )
    assert "nvidia.gpu.power.limit" in config.enabled_metrics()
    assert "hw.power" not in config.enabled_metrics()


def test_unknown_metric_names_the_valid_ones() -> None:
    with pytest.raises(ValidationError) as err:
        NvmlReceiverConfig.model_validate({"metrics": {"gpu.utilisation": {"enabled": True}}})
    message = str(err.value)
    assert 'unknown metric "gpu.utilisation" (did you mean "hw.gpu.utilization"?)' in message
    assert "nvidia.gpu.xid.errors" not in message  # the near one, not all of them


@pytest.mark.parametrize(
    "raw",
    [
        {"collection_interval": "0s"},
        {"collection_interval": 10},
        {"backend": "cuda"},
        {"devices": {"gpu": 0}},
        {"metrics": {"hw.power": {"enabled": True, "extra": 1}}},
        {"simulated": {"gpus": -1}},
        {"simulated": {"gpus": [{"processes": [{"pid": 0}]}]}},
        {"simulated": {"unsupported_fields": ["NVML_FI_DEV_NOPE"]}},
        {"simulated": {"gpus": [{"lost_after": "soon"}]}},
        {"nvml": True},
    ],
)
def test_invalid_configs_are_refused(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        NvmlReceiverConfig.model_validate(raw)


def test_simulated_block() -> None:
    config = NvmlReceiverConfig.model_validate(
        {
            "simulated": {
                "gpus": [
                    {
                        "uuid": "GPU-8f6c",
                        "mig": [{"uuid": "MIG-1c2d", "profile": "1g.10gb"}],
                        "processes": [{"pid": 4242, "used_memory": "2GiB"}],
                        "lost_after": "30s",
                        "unsupported_fields": ["NVML_FI_DEV_MEMORY_TEMP"],
                    }
                ],
                "library_missing": 3,
            }
        }
    )
    assert config.use_simulated(lambda: False) is True
    assert config.simulated is not None
    (gpu,) = config.simulated.gpu_list()
    assert gpu.processes[0].used_memory == 2 << 30
    assert gpu.lost_after == 30.0
    assert config.simulated.library_missing == 3
    three = NvmlReceiverConfig.model_validate({"simulated": {"gpus": 3}}).simulated
    assert three is not None and len(three.gpu_list()) == 3


def test_explicit_backend_wins_over_the_simulated_block() -> None:
    config = NvmlReceiverConfig.model_validate({"backend": "nvml", "simulated": {"gpus": 2}})
    assert config.use_simulated(lambda: False) is False


def test_demo_pipeline_nvml_section_is_valid() -> None:
    raw = yaml.safe_load((ROOT / "pipelines" / "demo.yaml").read_text())
    config = NvmlReceiverConfig.model_validate(raw["receivers"]["nvml"])
    assert config.use_simulated(lambda: False) and config.processes
    assert config.simulated is not None
    gpus = config.simulated.gpu_list()
    assert len(gpus) == 2 and gpus[0].mig and gpus[1].processes
