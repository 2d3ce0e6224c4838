"""`naming: dcgm`: dcgm-exporter's label names and the labels it derives.

Metric names, units and the fields a metric splits into are the receivers' (the naming table
the exporter is given, see `targets.py`); the labels here are dcgm-exporter's for the
attributes every component shares (`otelgpu.pdata.semconv`), and the receivers' tables add
their point attributes (the XID code is `err_code`).

Labels follow dcgm-exporter's templates: `Hostname` is the GPU's `host.name` (the node name in
Kubernetes; `dcgm_labels: {hostname: hostname}` spells it as dcgm-exporter after its rename); a
held device's pod UID is `pod_uid` only with `dcgm_labels: {pod_uid: true}`, as with
dcgm-exporter's `--kubernetes-enable-pod-uid`; a
MIG instance's `device` is its GPU's (`nvidia0`), and its `UUID` the GPU's UUID; an XID gets
dcgm-exporter's `err_msg` next to its `err_code` (in `otel` naming it stays the per-code counter
`nvidia.gpu.xid.errors`); a DRA holder's claim is dcgm-exporter's `dra_claim_name` /
`dra_claim_namespace`.
"""

from __future__ import annotations

from collections.abc import Mapping

from otelgpu.exporters.prometheus.dcgm_xid import xid_message
from otelgpu.pdata import semconv
from otelgpu.pdata.model import AttrValue

XID_CODE_LABEL = "err_code"  # dcgm-exporter's label of the XID code (a receiver's attribute)
POD_UID_LABEL = "pod_uid"  # dcgm-exporter's `--kubernetes-enable-pod-uid` label

# Resource and datapoint attributes with a dcgm-exporter label of their own. These names are
# authoritative: another attribute that sanitizes to the same name is dropped, so a pod label
# called `gpu` can never corrupt the `gpu` label a dashboard filters on.
LABELS: Mapping[str, str] = {
    semconv.GPU_INDEX: "gpu",
    semconv.HW_ID: "UUID",
    semconv.HW_NAME: "device",
    semconv.HW_MODEL: "modelName",
    semconv.HOST_NAME: "Hostname",  # `hostname` with dcgm_labels: {hostname: hostname}
    semconv.GPU_PCI_BUS_ID: "pci_bus_id",
    semconv.HW_DRIVER_VERSION: "DCGM_FI_DRIVER_VERSION",
    # dcgm-exporter renders these label fields when they are enabled in its CSV; here they
    # are static facts, on the device's info series only (`device_info`).
    semconv.HW_SERIAL_NUMBER: "DCGM_FI_DEV_SERIAL",
    semconv.HW_FIRMWARE_VERSION: "DCGM_FI_DEV_VBIOS_VERSION",
    semconv.GPU_REPLICA: "vgpu",
    semconv.K8S_POD_NAME: "pod",
    semconv.K8S_NAMESPACE_NAME: "namespace",
    semconv.K8S_CONTAINER_NAME: "container",
    # dcgm-exporter's DRA labels (`--kubernetes-enable-dra`); ours are on allocation series.
    semconv.GPU_RESOURCECLAIM_NAME: "dra_claim_name",
    semconv.GPU_RESOURCECLAIM_NAMESPACE: "dra_claim_namespace",
    semconv.MIG_PROFILE: "GPU_I_PROFILE",
    semconv.MIG_GPU_INSTANCE_ID: "GPU_I_ID",
    # Derived in dcgm naming only (`derive`): the XID's text, as dcgm-exporter's err_msg.
    "nvidia.xid.message": "err_msg",
}
_XID_MESSAGE = "nvidia.xid.message"
HOSTNAME_SPELLINGS = ("Hostname", "hostname")
# Runtime business labels: the key after the prefix, sanitized, behind dcgm-style prefixes.
# Pod labels get no prefix, as dcgm-exporter's `--kubernetes-enable-pod-labels` renders them.
PREFIXES: tuple[tuple[str, str], ...] = (
    (semconv.CONTAINER_ENV_PREFIX, "env_"),
    (semconv.CONTAINER_LABEL_PREFIX, "label_"),
    (semconv.POD_ANNOTATION_PREFIX, "annotation_"),
    (semconv.POD_LABEL_PREFIX, ""),
)


def label_names(
    hostname: str = "Hostname", points: Mapping[str, str] | None = None, pod_uid: bool = False
) -> Mapping[str, str]:
    """`LABELS` with the host label spelled `hostname` (`Hostname` or dcgm-exporter's later
    lowercase rename, the `dcgm_labels.hostname` option), the pod's UID as `pod_uid` with
    `pod_uid` (the `dcgm_labels.pod_uid` option; without it a device's series leave it off, see
    `labels.py`), and the receivers' `points` labels (`NamingTable.dcgm_labels`; `LABELS` wins
    a clash)."""
    if hostname not in HOSTNAME_SPELLINGS:
        raise ValueError(f"hostname label must be one of {', '.join(HOSTNAME_SPELLINGS)}")
    uid = {semconv.K8S_POD_UID: POD_UID_LABEL} if pod_uid else {}
    return {**(points or {}), **LABELS, semconv.HOST_NAME: hostname, **uid}


def derive(attributes: dict[str, AttrValue], mig: bool, xid_code: str | None) -> None:
    """Adds or rewrites the attributes dcgm-exporter's labels need and ours do not carry: a MIG
    instance's `device` is its GPU's (`nvidia0/gi3` → `nvidia0`), an XID (the attribute
    `xid_code`, labelled `err_code`) gets its text."""
    if mig:
        name = attributes.get(semconv.HW_NAME)
        if isinstance(name, str):
            attributes[semconv.HW_NAME] = name.partition("/")[0]
    code = attributes.get(xid_code) if xid_code is not None else None
    if code is not None:
        attributes[_XID_MESSAGE] = xid_message(code)
