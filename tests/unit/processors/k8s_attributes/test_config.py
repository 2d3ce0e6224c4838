"""The processor's config: defaults are the documented defaults; bad values are refused, and
`validate` names each Collector contrib option and quotes what was written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from otelgpu.component.component import ComponentID, Kind
from otelgpu.config.schema import AgentConfig
from otelgpu.processors.k8s_attributes.config import K8sAttributesProcessorConfig
from tests.unit.config.pipelines import refusals, through, validated


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
            "pod_resources_socket": "/host/kubelet/pod-resources/kubelet.sock",
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
    assert config.pod_resources_socket == "/host/kubelet/pod-resources/kubelet.sock"
    assert config.resource_names == ["nvidia.com/gpu", "nvidia.com/gpu.shared"]
    assert config.node_name == "gpu-node-7"


def test_the_receive_size_takes_any_positive_byte_count() -> None:
    text = "processors: {k8s_attributes: {max_receive_message_size: 1}}"
    config = _validate(text).components[Kind.PROCESSOR][ComponentID.parse("k8s_attributes")]
    assert isinstance(config, K8sAttributesProcessorConfig)
    assert config.max_receive_message_size == 1
    assert _errors(text.replace(": 1}", ": 0}")) == [
        "f.yaml:1:57: processors::k8s_attributes::max_receive_message_size: must be greater than 0"
    ]


PIPELINE = through("k8s_attributes")

CONTRIB = (
    ": options of the Collector contrib k8s_attributes processor, which asks the API server "
    "about pods by IP."
)


def _validate(text: str) -> AgentConfig:
    return validated(PIPELINE, text)


def _errors(text: str) -> list[str]:
    return refusals(PIPELINE, text)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("auth_type", "serviceAccount"),
        ("passthrough", "false"),
        ("extract", "{metadata: [k8s.pod.name]}"),
        ("pod_association", "[{sources: [{from: connection}]}]"),
        ("filter", "{node_from_env_var: KUBE_NODE_NAME}"),
        ("exclude", "{pods: [{name: jaeger-agent}]}"),
        ("wait_for_metadata", "true"),
        ("wait_for_metadata_timeout", "10s"),
    ],
)
def test_a_contrib_option_alone_is_named_in_the_contrib_error(key: str, value: str) -> None:
    (line,) = _errors(f"processors:\n  k8s_attributes:\n    {key}: {value}\n")
    assert line.startswith(f"f.yaml:3:5: processors::k8s_attributes: {key}{CONTRIB}")


def test_a_relative_socket_path_is_quoted_whole_in_its_error() -> None:
    text = "processors:\n  k8s_attributes:\n    pod_resources_socket: kubelet.sock\n"
    assert _errors(text) == [
        "f.yaml:3:27: processors::k8s_attributes::pod_resources_socket: must be an absolute "
        'path (got "kubelet.sock")'
    ]


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
