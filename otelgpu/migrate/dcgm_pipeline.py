"""What each of dcgm-exporter's flags becomes in otelgpu: the pipeline file's options and the
otelgpu chart's values (`Builder`), or a comment saying why there is none.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from otelgpu.migrate.dcgm_chart import DCGM_COUNTERS, mounted_counters
from otelgpu.migrate.dcgm_flags import FLAGS, Flag, Given, device_settings
from otelgpu.migrate.dcgm_render import Migration, dump

# Where otelgpu's chart mounts the counters CSV (templates/daemonset.yaml).
CHART_COUNTERS = "/etc/otelgpu-counters/counters.csv"
# dcgm-exporter's image: the counters CSV with its DCP fields too (its default: DCGM_COUNTERS).
DCGM_DCP_COUNTERS = "/etc/dcgm-exporter/dcp-metrics-included.csv"  # the same fields on
DCGM_CHART_CONFIGMAP = "exporter-metrics-config-map"
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu", "nvidia.com/mig-*")
# Pipeline options the otelgpu chart has no value for: given, the chart gets the whole
# pipeline (pipeline.config).
_PIPELINE_ONLY = {
    "devices", "no-hostname", "fake-gpus", "debug", "log-format", "hpc-job-mapping-dir",
    "nvidia-resource-names", "kubernetes-virtual-gpus", "kubernetes-gpu-id-type",
    "kubernetes-enable-pod-uid", "kubernetes-enable-dra",
}  # fmt: skip


class Builder:
    """What each given flag becomes: the nvml receiver's options, the processors, the
    prometheus exporter's, the agent's own logs, and the otelgpu chart's values, with a
    comment per flag (`build`)."""

    def __init__(self, given: dict[str, Given], read_text: Any, values: Any) -> None:
        self.given = given
        self.read_text = read_text
        self.from_chart = values is not None
        self.values = values or {}
        self.nvml: dict[str, Any] = {}
        self.prometheus: dict[str, Any] = {"endpoint": "0.0.0.0:9400", "naming": "dcgm"}
        self.processors: dict[str, dict[str, Any]] = {}
        self.telemetry: dict[str, Any] = {}
        self.chart: dict[str, Any] = {"naming": "dcgm"}
        self.comments: list[str] = []
        self.chart_comments: list[str] = []

    def value(self, name: str) -> str:
        g = self.given.get(name)
        return g.value if g else next(f.default for f in FLAGS if f.name == name)

    def said(self, flag: Flag, text: str) -> None:
        g = self.given[flag.name]
        self.comments.append(f"{g.origin}={g.value}: {text}")

    def build(self) -> Migration:
        self._interval()
        self._counters()
        self._address()
        for name, g in self.given.items():
            if name in ("collect-interval", "collectors", "address", "configmap-data"):
                continue  # done above: they shape what the others build on
            handler = getattr(self, "_" + name.replace("-", "_"), None)
            before = len(self.comments)
            if handler is not None:
                handler(g)
            elif g.flag.reason:
                self.said(g.flag, f"no equivalent: {g.flag.reason}")
            else:  # an equivalent that needs nothing set
                self.said(g.flag, g.flag.otelgpu)
            if len(self.comments) == before:  # a switch left off: nothing to carry over
                self.said(g.flag, "off, as otelgpu's default")
        if self.value("kubernetes") == "true":
            self.processors.setdefault("k8s_attributes", {})
        order = ("k8s_attributes", "container_env", "hpc_jobs", "resource")
        processors = {k: self.processors[k] for k in order if k in self.processors}
        pipeline: dict[str, Any] = {"receivers": {"nvml": self.nvml}}
        if processors:
            pipeline["processors"] = processors
        pipeline["exporters"] = {"prometheus": self.prometheus}
        service: dict[str, Any] = {}
        if self.telemetry:
            service["telemetry"] = {"logs": self.telemetry}
        service["pipelines"] = {
            "metrics": {
                "receivers": ["nvml"],
                **({"processors": list(processors)} if processors else {}),
                "exporters": ["prometheus"],
            }
        }
        pipeline["service"] = service
        self._chart_pipeline(pipeline)
        return Migration(pipeline, self.chart, self.comments, self.chart_comments)

    def _chart_pipeline(self, pipeline: dict[str, Any]) -> None:
        """Options the chart has no value for: the chart takes the whole pipeline."""
        needs = sorted(n for n in self.given if n in _PIPELINE_ONLY)
        if not needs:
            return
        for key in ("collectionInterval", "containerEnv"):
            self.chart.pop(key, None)
        chart_pipeline = copy.deepcopy(pipeline)
        nvml = chart_pipeline["receivers"]["nvml"]
        if "counters_csv" in nvml:
            nvml["counters_csv"] = CHART_COUNTERS
        if "k8s_attributes" in chart_pipeline.get("processors", {}):
            chart_pipeline["processors"]["k8s_attributes"]["pod_resources_socket"] = (
                POD_RESOURCES_SOCKET
            )
        # The chart's probes ask the health_check extension (templates/daemonset.yaml).
        chart_pipeline["extensions"] = {"health_check": {"endpoint": "0.0.0.0:13133"}}
        chart_pipeline["service"] = {"extensions": ["health_check"], **chart_pipeline["service"]}
        self.chart["pipeline"] = {"config": dump(chart_pipeline)}
        why = ", ".join(f"--{n}" for n in needs)
        self.chart_comments.append(
            f"pipeline.config: the chart has no value for {why}; it runs this pipeline"
        )

    def _interval(self) -> None:
        ms = int(self.value("collect-interval"))
        if ms <= 0:
            raise ValueError(f"collect-interval {ms}: must be above 0 ms")
        interval = f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
        self.nvml["collection_interval"] = interval
        self.chart["collectionInterval"] = interval
        g = self.given.get("collect-interval")
        if g is None:
            self.comments.append(
                f"collection_interval {interval}: dcgm-exporter's default (otelgpu's is 10s)"
            )
        else:
            self.said(g.flag, f"receivers::nvml::collection_interval: {interval}")

    def _counters(self) -> None:
        configmap = self.given.get("configmap-data")
        if configmap is not None and configmap.value != "none":
            namespace, _, name = configmap.value.partition(":")
            if not name:
                raise ValueError(f"configmap-data {configmap.value!r}: expected NAMESPACE:NAME")
            self.chart["countersConfigMap"] = {"name": name, "key": "metrics"}
            self.nvml["counters_csv"] = CHART_COUNTERS
            self.said(
                configmap.flag,
                f"chart: countersConfigMap {name} (key metrics, mounted at {CHART_COUNTERS}; "
                f"it must be in the release's namespace, here {namespace}); the pipeline "
                "reads the mounted file",
            )
            return
        g = self.given.get("collectors")
        path = self.value("collectors")
        if self.from_chart and path == DCGM_COUNTERS:  # where its chart mounts its ConfigMap
            mounted = mounted_counters(self.values)
            if mounted is not None:
                return self._chart_counters(*mounted)
        text = self.read_text(path)
        if text is None:
            if path in (DCGM_COUNTERS, DCGM_DCP_COUNTERS):
                self.nvml["metric_set"] = "default"
                self.comments.append(
                    f"{path} (dcgm-exporter's image): its rows on are dcgm-exporter's default "
                    "counters, which metric_set default is"
                )
                return None
            origin = g.origin if g else "--collectors"
            raise ValueError(f"{origin} {path}: cannot read the counters CSV here")
        self.nvml["counters_csv"] = path
        self.chart["counters"] = text
        origin = g.origin if g else "the default"
        self.comments.append(
            f"{origin}={path}: receivers::nvml::counters_csv (chart: counters, its text)"
        )
        return None

    def _chart_counters(self, configmap: str, key: str) -> None:
        """The counters CSV in a ConfigMap of dcgm-exporter's chart."""
        custom = self.values.get("customMetrics")
        if configmap == DCGM_CHART_CONFIGMAP and custom:
            self.chart["counters"] = str(custom)
            where = "customMetrics: the chart's counters"
        elif configmap == DCGM_CHART_CONFIGMAP:  # its chart's copy of the default counters
            self.nvml["metric_set"] = "default"
            self.comments.append(
                "the chart's default counters: metric_set default is the same fields"
            )
            return
        else:
            self.chart["countersConfigMap"] = {"name": configmap, "key": key}
            where = f"ConfigMap {configmap} (key {key}): chart countersConfigMap"
        self.nvml["counters_csv"] = CHART_COUNTERS
        self.comments.append(
            f"{where}, mounted at {CHART_COUNTERS} (to run this file elsewhere, save the CSV "
            "there or change the path)"
        )

    def _address(self) -> None:
        address = self.value("address")
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"address {address!r}: expected HOST:PORT")
        endpoint = f"{host or '0.0.0.0'}:{port}"
        self.prometheus["endpoint"] = endpoint
        if port != "9400":
            self.chart["service"] = {"port": int(port)}
        g = self.given.get("address")
        if g is not None:
            self.said(g.flag, f"exporters::prometheus::endpoint: {endpoint}")

    def _kubernetes(self, g: Given) -> None:
        if g.value == "true":
            self.said(g.flag, "the k8s_attributes processor (pod, namespace, container)")
        else:
            self.said(g.flag, "no k8s_attributes processor")

    def _kubernetes_enable_pod_labels(self, g: Given) -> None:
        if g.value != "true":
            return self.said(g.flag, "no pod labels")
        patterns = self._allowlist() or ["*"]
        env = self.processors.setdefault("container_env", {})
        env["pod_labels"] = {"include": patterns}
        self.chart.setdefault("containerEnv", {})["podLabels"] = patterns
        self.said(g.flag, f"processors::container_env::pod_labels::include: {patterns}")
        return None

    def _allowlist(self) -> list[str]:
        g = self.given.get("kubernetes-pod-label-allowlist-regex")
        if g is None:
            return []
        out: list[str] = []
        for regex in filter(None, (r.strip() for r in g.value.split(","))):
            glob = _glob_of(regex)
            if glob is None:
                self.comments.append(
                    f"{g.origin}: {regex!r} is a regex otelgpu cannot take (it takes exact "
                    "keys and * globs): write the keys it should match"
                )
            else:
                out.append(glob)
        return out

    def _kubernetes_pod_label_allowlist_regex(self, g: Given) -> None:
        if self.value("kubernetes-enable-pod-labels") != "true":
            self.said(g.flag, "ignored without --kubernetes-enable-pod-labels, as there")
        else:
            self.said(g.flag, "globs in processors::container_env::pod_labels::include")

    def _kubernetes_gpu_id_type(self, g: Given) -> None:
        chosen = {"uid": "uuid", "device-name": "device-name"}.get(g.value)
        if chosen is None:
            raise ValueError(f"{g.origin} {g.value!r}: expected uid or device-name")
        self.processors.setdefault("k8s_attributes", {})["device_id_type"] = chosen
        self.said(g.flag, f"processors::k8s_attributes::device_id_type: {chosen}")

    def _devices(self, g: Given) -> None:
        settings, said = device_settings(g)
        self.nvml.update(settings)
        self.said(g.flag, said)

    def _no_hostname(self, g: Given) -> None:
        if g.value != "true":
            return None
        self.processors["resource"] = {"attributes": [{"key": "host.name", "action": "delete"}]}
        return self.said(g.flag, "a resource processor deletes host.name (no Hostname label)")

    def _fake_gpus(self, g: Given) -> None:
        if g.value != "true":
            return None
        self.nvml["backend"] = "simulated"
        self.nvml["simulated"] = {"gpus": 2}
        return self.said(g.flag, "receivers::nvml::backend: simulated (2 simulated GPUs)")

    def _web_config_file(self, g: Given) -> None:
        text = self.read_text(g.value) if g.value else None
        if text is None:
            return self.said(
                g.flag,
                "exporters::prometheus::tls (cert_file, key_file, client_ca_file) and "
                "basic_auth (username, password_hash): the file cannot be read here, set them "
                "from it",
            )
        web = yaml.safe_load(text) or {}
        tls = web.get("tls_server_config") or {}
        if tls.get("cert_file") and tls.get("key_file"):
            self.prometheus["tls"] = {"cert_file": tls["cert_file"], "key_file": tls["key_file"]}
            if tls.get("client_ca_file"):
                self.prometheus["tls"]["client_ca_file"] = tls["client_ca_file"]
        users = web.get("basic_auth_users") or {}
        if len(users) == 1:
            ((user, hashed),) = users.items()
            self.prometheus["basic_auth"] = {"username": user, "password_hash": hashed}
        elif users:
            self.comments.append(
                f"{g.origin}: {len(users)} basic-auth users; otelgpu takes one, none carried over"
            )
        return self.said(g.flag, "exporters::prometheus::tls and basic_auth, from the file")

    def _debug(self, g: Given) -> None:
        if g.value == "true":
            self.telemetry["level"] = "debug"
            self.said(g.flag, "service::telemetry::logs::level: debug")

    def _log_format(self, g: Given) -> None:
        encoding = {"text": "console", "json": "json"}.get(g.value)
        if encoding is None:
            raise ValueError(f"{g.origin} {g.value!r}: expected text or json")
        if encoding == "json":
            self.telemetry["encoding"] = "json"
        self.said(g.flag, f"service::telemetry::logs::encoding: {encoding}")

    def _pod_resources_kubelet_socket(self, g: Given) -> None:
        self.processors.setdefault("k8s_attributes", {})["pod_resources_socket"] = g.value
        suffix = "/pod-resources/kubelet.sock"
        if g.value.endswith(suffix) and g.value != POD_RESOURCES_SOCKET:
            self.chart["kubeletRoot"] = g.value[: -len(suffix)]
        self.said(g.flag, f"processors::k8s_attributes::pod_resources_socket: {g.value}")

    def _hpc_job_mapping_dir(self, g: Given) -> None:
        if g.value:
            self.processors["hpc_jobs"] = {"job_mapping_dir": g.value}
            self.said(g.flag, f"the hpc_jobs processor, job_mapping_dir: {g.value}")

    def _nvidia_resource_names(self, g: Given) -> None:
        names = [n.strip() for n in g.value.split(",") if n.strip()]
        merged = list(dict.fromkeys([*DEFAULT_RESOURCE_NAMES, *names]))
        self.processors.setdefault("k8s_attributes", {})["resource_names"] = merged
        self.said(g.flag, f"processors::k8s_attributes::resource_names: {merged}")

    def _kubernetes_virtual_gpus(self, g: Given) -> None:
        if g.value == "true":
            self.prometheus["shared_gpu_series"] = "per_holder"
            self.said(g.flag, "exporters::prometheus::shared_gpu_series: per_holder")

    def _kubernetes_enable_pod_uid(self, g: Given) -> None:
        if g.value == "true":
            self.prometheus.setdefault("dcgm_labels", {})["pod_uid"] = True
            self.said(g.flag, "exporters::prometheus::dcgm_labels: {pod_uid: true}")

    def _kubernetes_enable_dra(self, g: Given) -> None:
        if g.value == "true":
            self.prometheus.setdefault("dcgm_labels", {})["dra"] = True
            self.said(g.flag, "exporters::prometheus::dcgm_labels: {dra: true}")


def _glob_of(regex: str) -> str | None:
    """A pod-label regex as an include pattern, where it is a key or `prefix.*`."""
    body = regex.removeprefix("^").removesuffix("$")
    star = body.endswith(".*")
    body = body.removesuffix(".*")
    plain = body.replace("\\.", ".")
    if not plain or any(c in plain for c in "\\[](){}|+?*^$"):
        return None
    return plain + "*" if star else plain
