"""dcgm-exporter's Helm chart values, as `otelgpu migrate dcgm-exporter --values` reads them:
the command line and environment its chart gives the container (`chart_command`), the
ConfigMap it mounts as the counters CSV (`mounted_counters`), and the values that have an
otelgpu chart value of their own (`chart_values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# dcgm-exporter's image: the counters file its chart mounts.
DCGM_COUNTERS = "/etc/dcgm-exporter/default-counters.csv"
# otelgpu's chart tolerates the GPU Operator's taint (values.yaml `tolerations`).
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def chart_command(values: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The arguments and environment dcgm-exporter's chart gives the container."""
    argv = [str(a) for a in values.get("arguments") or ["-f", DCGM_COUNTERS]]
    dump = values.get("debugDump") or {}
    if dump.get("enabled"):
        argv += [
            "--dump-enabled",
            f"--dump-directory={dump.get('directory', '/tmp/dcgm-exporter-debug')}",
            f"--dump-retention={dump.get('retention', 24)}",
        ]
    k8s = values.get("kubernetes") or {}
    service = values.get("service") or {}
    env = {"DCGM_EXPORTER_KUBERNETES": "true", "NODE_NAME": "(spec.nodeName)"}
    if k8s.get("enablePodLabels"):
        env["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] = "true"
    if k8s.get("enablePodUID"):
        env["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"] = "true"
    if k8s.get("podLabelAllowlistRegex"):
        regexes = ",".join(k8s["podLabelAllowlistRegex"])
        env["DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"] = regexes
    env["DCGM_EXPORTER_LISTEN"] = str(service.get("address", ":9400"))
    if (values.get("kubernetesDRA") or {}).get("enabled"):
        env["KUBERNETES_ENABLE_DRA"] = "true"
    for item in values.get("extraEnv") or []:
        if isinstance(item, dict) and "name" in item and "value" in item:
            env[str(item["name"])] = str(item["value"])
    return argv, env


def chart_values(values: Mapping[str, Any], chart: dict[str, Any], notes: list[str]) -> None:
    """dcgm-exporter chart values with an otelgpu chart value of their own."""
    monitor = values.get("serviceMonitor") or {}
    ours = {
        k: monitor[k]
        for k in ("enabled", "interval", "scrapeTimeout", "additionalLabels", "relabelings",
                  "metricRelabelings")
        if monitor.get(k) not in (None, [], {})
    }  # fmt: skip
    if ours:
        chart["serviceMonitor"] = ours
    if monitor.get("honorLabels") is False or "honorLabels" not in monitor:
        notes.append(
            "serviceMonitor.honorLabels: dcgm-exporter's false renames the holder's labels "
            "exported_pod/exported_namespace; otelgpu's chart keeps pod/namespace "
            "(docs/migrating-from-dcgm-exporter.md, section 6, copies them back)"
        )
    for key in ("nodeSelector", "affinity", "podLabels", "podAnnotations"):
        if values.get(key):
            chart[key] = values[key]
    if values.get("tolerations"):  # a list replaces the chart's: keep its GPU taint's
        theirs = [t for t in values["tolerations"] if t != GPU_TOLERATION]
        chart["tolerations"] = [GPU_TOLERATION, *theirs]
    for key in ("priorityClassName", "runtimeClassName"):
        if values.get(key):
            chart[key] = values[key]
    port = (values.get("service") or {}).get("port")
    if port and port != 9400:
        chart["service"] = {"port": port}
    tls = values.get("tlsServerConfig") or {}
    if tls.get("enabled"):
        if tls.get("existingSecret"):
            chart.setdefault("prometheus", {})["tls"] = {
                "secretName": tls["existingSecret"],
                "clientCA": tls.get("clientAuthType") == "RequireAndVerifyClientCert",
            }
        else:
            notes.append(
                "tlsServerConfig: otelgpu's chart takes an existing kubernetes.io/tls Secret "
                "(prometheus.tls.secretName); create one from the certificate"
            )
    if (values.get("basicAuth") or {}).get("users"):
        notes.append(
            "basicAuth.users: otelgpu's chart takes a Secret with username and password_hash "
            "(bcrypt), prometheus.basicAuth.secretName"
        )


def mounted_counters(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """(ConfigMap, key) that dcgm-exporter's chart mounts at its counters path, if any."""
    mounts = {
        str(m.get("name")): m
        for m in values.get("extraVolumeMounts") or []
        if isinstance(m, dict) and m.get("mountPath") == DCGM_COUNTERS
    }
    for volume in values.get("extraConfigMapVolumes") or []:
        if not isinstance(volume, dict) or str(volume.get("name")) not in mounts:
            continue
        cm = volume.get("configMap") or {}
        sub = mounts[str(volume.get("name"))].get("subPath", "")
        items = cm.get("items") or []
        key = next((i.get("key") for i in items if i.get("path") == sub), None)
        return str(cm.get("name", "")), str(key or sub or "metrics")
    return None
