"""Configuration of the `k8s_attributes` processor."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from otelgpu.config.types import PositiveDuration, Size, StrictModel

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
NODE_NAME_ENV = "K8S_NODE_NAME"
# The options of the Collector contrib processor of the same name, which labels by pod IP
# from the API server: none of them has a meaning here.
CONTRIB_KEYS = frozenset(
    {
        "auth_type",
        "passthrough",
        "extract",
        "pod_association",
        "filter",
        "exclude",
        "wait_for_metadata",
        "wait_for_metadata_timeout",
    }
)


class K8sAttributesProcessorConfig(StrictModel):
    """`processors::k8s_attributes`.

    pod_resources_socket: the kubelet's pod-resources unix socket (mount its directory,
      not the socket file, so a kubelet restart's new socket is seen).
    refresh_interval: how often the device → holder snapshot is refreshed (10s).
    timeout: the limit of one pod-resources request (5s).
    max_receive_message_size: the largest `List` answer accepted (1MiB: a thousand pods
      with three containers of eight GPUs each list in 1.4MiB, a full 110-pod node in tens
      of KiB; a hostile kubelet's cost grows with it, docs/architecture.md "gRPC peers").
    resource_names: globs of the extended resources that are GPUs (`nvidia.com/gpu`,
      `nvidia.com/mig-*`; add `nvidia.com/gpu.shared` for renamed time-sliced GPUs).
    device_id_type: how the device plugin names devices: `auto` (per device, from its
      form), `uuid` (GPU/MIG UUIDs), `index` (`"0"`), `device-name` (`nvidia0`, GKE).
    node_name: the value of `k8s.node.name`; empty means the K8S_NODE_NAME environment
      variable at start (set it from the downward API `spec.nodeName`).
    """

    pod_resources_socket: str = DEFAULT_SOCKET
    refresh_interval: PositiveDuration = 10.0
    timeout: PositiveDuration = 5.0
    max_receive_message_size: Size = Field(default=2**20, gt=0)
    resource_names: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu", "nvidia.com/mig-*"]
    )
    device_id_type: Literal["auto", "uuid", "index", "device-name"] = "auto"
    node_name: str = ""

    @model_validator(mode="before")
    @classmethod
    def _not_contrib(cls, data: Any) -> Any:
        found = sorted(CONTRIB_KEYS & set(data)) if isinstance(data, dict) else []
        if found:
            raise ValueError(
                f"{', '.join(found)}: options of the Collector contrib k8s_attributes processor, "
                "which asks the API server about pods by IP. This one asks the kubelet's "
                "pod-resources socket which pod and container hold each GPU, with its own "
                "options (pod_resources_socket, refresh_interval, resource_names, "
                "device_id_type, node_name); pod labels and annotations come from the "
                "container_env processor's pod_labels and annotations. Remove these keys; "
                "see docs/configuration.md"
            )
        return data

    @field_validator("pod_resources_socket")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f'must be an absolute path (got "{value}")')
        return value

    @field_validator("resource_names")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value or any(not name for name in value):
            raise ValueError("must list at least one non-empty resource name or glob")
        return value
