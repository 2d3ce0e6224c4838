"""The processor's config: defaults are the documented defaults; bad values are refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig


def test_defaults():
    config = K8sAttributesProcessorConfig()
    assert config.pod_resources_socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert config.refresh_interval == 10.0
    assert config.timeout == 5.0
    assert config.max_receive_message_size == 2**20
    assert config.resource_names == ["nvidia.com/gpu", "nvidia.com/mig-*"]
    assert config.device_id_type == "auto"
    assert config.node_name == ""


def test_yaml_values():
    config = K8sAttributesProcessorConfig.model_validate(
        {
            "refresh_interval": "30s",
            "timeout": "500ms",
            "max_receive_message_size": "64MiB",
            "resource_names": ["nvidia.com/gpu", "nvidia.com/gpu.shared"],
            "device_id_type": "device-name",
            "node_name": "gpu-node-7",
        }
    )
    assert (config.refresh_interval, config.timeout) == (30.0, 0.5)
    assert config.max_receive_message_size == 64 * 2**20
    assert config.device_id_type == "device-name"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"device_id_type": "uid"}, "device_id_type"),
        ({"refresh_interval": "0s"}, "refresh_interval"),
        ({"refresh_interval": 10}, "refresh_interval"),
        ({"timeout": "-1s"}, "timeout"),
        ({"pod_resources_socket": "kubelet.sock"}, "absolute path"),
        ({"resource_names": []}, "at least one"),
        ({"max_receive_message_size": "0"}, "max_receive_message_size"),
        ({"pod_resource_socket": "/x"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_values_are_refused(values: dict, message: str):
    with pytest.raises(ValidationError) as info:
        K8sAttributesProcessorConfig.model_validate(values)
    assert message in str(info.value)
