"""The `service.*` attributes the OTLP exporters put on every resource they send.

OTLP backends name the sender by them: Prometheus' OTLP endpoint turns `service.name` into the
`job` label and `service.instance.id` into `instance` (the only resource attributes it keeps on
each series by default). The instance ID must tell this node's agent from every other and stay
the same when the agent restarts (a new ID would start new series), so it is derived from the
node's name, as the semantic conventions ask of an ID taken from a stable name: a UUID version 5
of it in their namespace. The name is the one `host.name` carries: the Kubernetes node name from
the downward API (`K8S_NODE_NAME`, else dcgm-exporter's `NODE_NAME`), else the host name.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Mapping

from otelgpu import __version__
from otelgpu.pdata import semconv

SERVICE_NAME = "otelgpu"
NODE_NAME_ENVS = ("K8S_NODE_NAME", "NODE_NAME")
# The semantic conventions' namespace for a `service.instance.id` derived from a stable name.
INSTANCE_ID_NAMESPACE = uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320")


def node_name(environ: Mapping[str, str], hostname: Callable[[], str] = socket.gethostname) -> str:
    """This node's name: the first node-name variable set (not blank), else the host name (in
    a pod without hostNetwork that is the pod's name, which changes when the pod is replaced:
    the DaemonSet sets `K8S_NODE_NAME`)."""
    for variable in NODE_NAME_ENVS:
        name = environ.get(variable, "").strip()
        if name:
            return name
    return hostname()


def service_attributes(
    environ: Mapping[str, str], hostname: Callable[[], str] = socket.gethostname
) -> dict[str, str]:
    """`service.name`, `service.instance.id` and `service.version` of the agent on this node."""
    instance = uuid.uuid5(INSTANCE_ID_NAMESPACE, node_name(environ, hostname))
    return {
        semconv.SERVICE_NAME: SERVICE_NAME,
        semconv.SERVICE_INSTANCE_ID: str(instance),
        semconv.SERVICE_VERSION: __version__,
    }
