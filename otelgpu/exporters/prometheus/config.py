"""Configuration of the `prometheus` exporter."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from otelgpu.config.types import Endpoint, PositiveDuration, StrictModel
from otelgpu.exporters.prometheus.naming import LABEL_NAME_RE, replace_invalid

# `$2a$`, `$2b$` or `$2y$`, a two-digit cost, then 53 characters of salt and hash.
_BCRYPT_RE = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")


class TLSServerConfig(StrictModel):
    """`tls`: serve `/metrics` over HTTPS.

    cert_file, key_file: PEM certificate (chain) and private key. client_ca_file: when set,
    clients must present a certificate signed by one of these CAs (mutual TLS). min_version:
    `"1.2"` (default) or `"1.3"`; older protocols are never accepted.
    """

    cert_file: str = Field(min_length=1)
    key_file: str = Field(min_length=1)
    client_ca_file: str = ""
    min_version: Literal["1.2", "1.3"] = "1.2"


class BasicAuthConfig(StrictModel):
    """`basic_auth`: one user; `password_hash` is a bcrypt hash (`htpasswd -nbBC 10 user pw`)."""

    username: str = Field(min_length=1)
    password_hash: SecretStr

    @field_validator("password_hash")
    @classmethod
    def _bcrypt(cls, value: SecretStr) -> SecretStr:
        if not _BCRYPT_RE.match(value.get_secret_value()):
            raise ValueError("expected a bcrypt hash such as $2b$10$ followed by 53 characters")
        return value


class DcgmLabelsConfig(StrictModel):
    """`dcgm_labels`: how `naming: dcgm` spells labels that dcgm-exporter renamed, and the ones
    it adds only when asked.

    hostname: `Hostname` (dcgm-exporter's latest release, 4.5.3-4.8.2, the default) or
    `hostname` (its main branch's rename, #655).
    pod_uid: a held device's series carry its pod's UID as `pod_uid` (dcgm-exporter's
    `--kubernetes-enable-pod-uid`; container_env reads it from the pod's sandbox); off by
    default, as there.
    dra: a device one pod holds whole through a DRA claim has the claim on its series
    (`dra_claim_name`, `dra_claim_namespace`; dcgm-exporter's `--kubernetes-enable-dra`); off
    by default, as there (the claim is always on the allocation series).
    """

    hostname: Literal["Hostname", "hostname"] = "Hostname"
    pod_uid: bool = False
    dra: bool = False


class ResourceToTelemetryConfig(StrictModel):
    """`resource_to_telemetry_conversion`: accepted for Collector files, changes nothing here:
    resource attributes are always labels on every series (see translate.py)."""

    enabled: bool = False


class PrometheusExporterConfig(StrictModel):
    """`exporters::prometheus`.

    endpoint: where `/metrics` listens (`0.0.0.0:9400`, dcgm-exporter's port).
    metric_expiration: a series not updated for this long disappears (5m).
    naming: `otel` (OpenTelemetry → Prometheus translation) or `dcgm` (dcgm-exporter's names,
    labels and units, so its dashboards and alerts keep working).
    const_labels: labels added to every series (valid Prometheus label names).
    shared_gpu_series: `device` (one series per GPU and metric; holders of a shared GPU are in
    `nvidia_gpu_allocation_ratio`) or `per_holder` (dcgm-exporter's `--kubernetes-virtual-gpus`,
    its 4.8 rule: utilization and memory per holder from its processes' readings beside the
    device-level series; every other series copied once per holder with its labels and `vgpu`,
    whose sums double count; see `holders.py`).
    dcgm_labels: `{hostname: Hostname|hostname, pod_uid: false|true, dra: false|true}`: the host
    label's spelling in dcgm naming, and whether a held device's series carry `pod_uid` and
    its DRA claim.
    device_info: each device's static facts on its `hw_gpu_info` series (true); false leaves
    the info series out, where another exporter of the pipeline's devices serves them (the
    Helm chart's GPU status endpoint). The facts stay off the other series either way.
    tls: cert_file, key_file, client_ca_file, min_version (off by default).
    basic_auth: username, password_hash (bcrypt; off by default).
    namespace: prefixes every pipeline metric name with `<namespace>_` (characters outside
    [a-zA-Z0-9_] become `_`, as in the Collector); the agent's own `otelgpu_*` series keep
    their names. resource_to_telemetry_conversion: accepted, no effect (resource attributes
    are always labels here). send_timestamps: only false (see `_no_timestamps`).
    """

    endpoint: Endpoint = "0.0.0.0:9400"
    metric_expiration: PositiveDuration = 300.0
    naming: Literal["otel", "dcgm"] = "otel"
    const_labels: dict[str, str] = Field(default_factory=dict)
    shared_gpu_series: Literal["device", "per_holder"] = "device"
    dcgm_labels: DcgmLabelsConfig = Field(default_factory=DcgmLabelsConfig)
    device_info: bool = True
    tls: TLSServerConfig | None = None
    basic_auth: BasicAuthConfig | None = None
    namespace: str = ""
    resource_to_telemetry_conversion: ResourceToTelemetryConfig = Field(
        default_factory=ResourceToTelemetryConfig
    )
    send_timestamps: bool = False

    @model_validator(mode="before")
    @classmethod
    def _collector_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and "resource_constant_labels" in data:
            raise ValueError(
                "resource_constant_labels (a Collector option) is not needed here: every "
                "resource attribute (GPU, pod, node, business labels) is already a label on "
                "each series, as with resource_to_telemetry_conversion: true; remove it, and "
                "use const_labels for fixed labels"
            )
        return data

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        name = replace_invalid(value.strip())
        return f"_{name}" if name[:1].isdigit() else name

    @field_validator("send_timestamps")
    @classmethod
    def _no_timestamps(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "send_timestamps: true is not supported: series are rendered once per batch "
                "and served as they are, so Prometheus stamps each sample with its scrape time "
                "(the Collector's default, false)"
            )
        return value

    @field_validator("const_labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [n for n in value if not LABEL_NAME_RE.match(n) or n.startswith("__")]
        if bad:
            names = ", ".join(f'"{name}"' for name in bad)
            raise ValueError(
                f"invalid label name{'s' if len(bad) > 1 else ''} {names}: expected "
                "[a-zA-Z_][a-zA-Z0-9_]* not starting with __"
            )
        return value
