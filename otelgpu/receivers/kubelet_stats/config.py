"""Configuration of the `kubelet_stats` receiver."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum

from pydantic import Field, field_validator, model_validator

from otelgpu.config.types import MetricToggle, PositiveDuration, StrictModel, check_metric_names
from otelgpu.receivers.kubelet_stats.metrics import CATALOGS, Group, Naming

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SECURE_PORT = 10250
READ_ONLY_PORT = 10255
NODE_NAME_ENV = "K8S_NODE_NAME"

_ENDPOINT_RE = re.compile(r"^(?:(https?)://)?(\[[0-9a-fA-F:.]+\]|[^\s/:\[\]]+)(?::(\d{1,5}))?/?$")


class AuthType(Enum):
    """How the receiver authenticates to the kubelet."""

    SERVICE_ACCOUNT = "serviceAccount"
    NONE = "none"


class KubeletStatsReceiverConfig(StrictModel):
    """`receivers::kubelet_stats`.

    endpoint: `host:port` or a full `https://host:port` URL of the kubelet (default
      `https://${K8S_NODE_NAME}:10250`, the variable read at start; `:10255` over plain http
      with `read_only_port`).
    auth_type: `serviceAccount` (the pod's token as a bearer token, re-read when it changes) or
      `none`; default `serviceAccount` over https and `none` over plain http.
    token_file: the service-account token (the projected token path).
    ca_file: CA bundle to verify the kubelet's serving certificate (the service-account CA).
    insecure_skip_verify: do not verify the kubelet's certificate (kubelets with self-signed
      serving certificates) (false).
    read_only_port: talk plain http to the read-only port, without a token (false).
    metric_groups: which entities to report: node, pod, container, volume (node, pod, container).
    metric_names: `semconv` (the OpenTelemetry semantic conventions where they name a metric)
      or `contrib` (the Collector's kubeletstats receiver's names and types) (semconv).
    metrics: `{NAME: {enabled: bool}}` over the catalog's defaults (docs/kubelet_stats.md),
      names of the chosen `metric_names`.
    collection_interval: how often the summary is read (10s).
    timeout: how long one request may take (5s).
    stale_after_failed_reads: after this many failed reads in a row, every series the
      receiver reported is dropped (gone markers) until the kubelet answers again (3).
    """

    endpoint: str | None = None
    auth_type: AuthType | None = None
    token_file: str = f"{SERVICE_ACCOUNT_DIR}/token"
    ca_file: str | None = None
    insecure_skip_verify: bool = False
    read_only_port: bool = False
    metric_groups: list[Group] = Field(
        default_factory=lambda: [Group.NODE, Group.POD, Group.CONTAINER], min_length=1
    )
    metric_names: Naming = Naming.SEMCONV
    metrics: dict[str, MetricToggle] = Field(default_factory=dict)
    collection_interval: PositiveDuration = 10.0
    timeout: PositiveDuration = 5.0
    # 3 reads (30s at the default interval): one refused connection during a kubelet restart
    # does not blank the node's dashboards, and a real outage never serves frozen values
    # for minutes (cAdvisor's series end at the first failed scrape).
    stale_after_failed_reads: int = Field(default=3, ge=1, le=1000)

    @field_validator("endpoint")
    @classmethod
    def _endpoint_shape(cls, value: str | None) -> str | None:
        match = _ENDPOINT_RE.match(value) if value is not None else None
        if value is not None and (match is None or int(match.group(3) or 0) > 65535):
            raise ValueError(f'invalid endpoint "{value}": expected host:port or https://host:port')
        return value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: dict[str, MetricToggle]) -> dict[str, MetricToggle]:
        # Either naming's names here; the model check below holds them to the chosen one.
        check_metric_names(value, list(dict.fromkeys(s.name for c in CATALOGS.values() for s in c)))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KubeletStatsReceiverConfig:
        scheme = self.scheme()
        if self.read_only_port and scheme == "https":
            raise ValueError("read_only_port is plain http; the endpoint says https")
        if scheme == "http" and self.auth_type is AuthType.SERVICE_ACCOUNT:
            raise ValueError(
                "auth_type serviceAccount over plain http would send the token in clear: "
                "use an https endpoint or auth_type none"
            )
        if self.insecure_skip_verify and self.ca_file is not None:
            raise ValueError("set either ca_file or insecure_skip_verify, not both")
        names = {spec.name for spec in CATALOGS[self.metric_names]}
        if other := sorted(name for name in self.metrics if name not in names):
            raise ValueError(
                f"metrics {', '.join(other)}: not a name under metric_names "
                f"{self.metric_names.value} (see docs/kubelet_stats.md for its names)"
            )
        return self

    def scheme(self) -> str:
        """`https`, or `http` for the read-only port or an explicit http:// endpoint."""
        if self.endpoint is not None and "://" in self.endpoint:
            return self.endpoint.partition("://")[0]
        return "http" if self.read_only_port else "https"

    def effective_auth(self) -> AuthType:
        """The auth type in force: the explicit one, else serviceAccount over https only."""
        if self.auth_type is not None:
            return self.auth_type
        return AuthType.SERVICE_ACCOUNT if self.scheme() == "https" else AuthType.NONE

    def effective_ca_file(self) -> str | None:
        """The CA bundle to verify with; None when verification is off or over plain http."""
        if self.insecure_skip_verify or self.scheme() == "http":
            return None
        return self.ca_file or f"{SERVICE_ACCOUNT_DIR}/ca.crt"

    def summary_url(self, environ: Mapping[str, str]) -> str:
        """The `/stats/summary` URL; reads K8S_NODE_NAME when no endpoint is given.

        Raises ValueError when neither is available (the receiver then refuses to start).
        """
        endpoint = self.endpoint
        if endpoint is None:
            node = environ.get(NODE_NAME_ENV, "")
            if not node:
                raise ValueError(
                    f"{NODE_NAME_ENV} is not set: set it from the downward API "
                    "(spec.nodeName) or give the receiver an endpoint"
                )
            endpoint = f"{node}:{READ_ONLY_PORT if self.read_only_port else SECURE_PORT}"
        if "://" not in endpoint:
            endpoint = f"{self.scheme()}://{endpoint}"
        return endpoint.rstrip("/") + "/stats/summary"

    def enabled_metrics(self) -> frozenset[str]:
        """The catalog names to emit: in a chosen group, defaults then `metrics` overrides."""
        groups = set(self.metric_groups)
        return frozenset(
            spec.name
            for spec in CATALOGS[self.metric_names]
            if spec.group in groups
            and (self.metrics[spec.name].enabled if spec.name in self.metrics else spec.enabled)
        )
