"""The Grafana dashboards of deploy/dashboards, one per naming, built from one description.

`otelgpu-gpus.json` reads the agent in `naming: otel` (hw_* / nvidia_gpu_* names, k8s_* labels)
and `otelgpu-gpus-dcgm.json` in `naming: dcgm` (DCGM_FI_* names and units, dcgm-exporter's
labels). Both have the same rows and panels: each panel is written once below, with one query
per naming where the names differ and one shared query where only label names do (`%ns%`,
`%pod%`, ... stand for the naming's label names, `%F%` for the filter on every dashboard
variable, `%N%` for the node filter alone). `python -m tests.deploy.sync --write` writes the
two files (and their copies in the Helm chart); the suite fails while one is stale.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Naming:
    """The label names and matchers a naming's series carry."""

    name: str
    namespace: str
    pod: str
    container: str
    gpu: str  # the label naming a device in joins
    gpu_label: str  # the label a legend shows a GPU by
    gpu_legend: str
    model: str
    whole: str  # matches whole GPUs (not MIG instances)
    mig: str  # matches MIG instances
    profile: str
    env_default: str
    business_help: str

    def fill(self, text: str) -> str:
        """`text` with the placeholders of the module doc replaced."""
        node = 'k8s_node_name=~"$node"'
        workload = (
            f'{node},{self.namespace}=~"$namespace",{self.pod}=~"$pod",'
            f'{self.container}=~"$container",$env_label=~"$env_value"'
        )
        for key, value in (
            ("%F%", workload),
            ("%N%", node),
            ("%node%", "k8s_node_name"),
            ("%ns%", self.namespace),
            ("%pod%", self.pod),
            ("%ctr%", self.container),
            ("%gpu%", self.gpu),
            ("%glabel%", self.gpu_label),
            ("%gname%", self.gpu_legend),
            ("%model%", self.model),
            ("%whole%", self.whole),
            ("%mig%", self.mig),
            ("%profile%", self.profile),
        ):
            text = text.replace(key, value)
        return text


OTEL = Naming(
    name="otel",
    namespace="k8s_namespace_name",
    pod="k8s_pod_name",
    container="k8s_container_name",
    gpu="hw_id",
    gpu_label="hw_name",
    gpu_legend="{{hw_name}}",
    model="hw_model",
    whole='hw_parent=""',
    mig='hw_parent!=""',
    profile="nvidia_mig_profile",
    env_default="container_env_TEAM",
    business_help=(
        "A label the container_env processor adds, e.g. container_env_TEAM for env: "
        "{include: [TEAM]} (container_label_*, k8s_pod_label_*, k8s_pod_annotation_* work too)."
    ),
)
DCGM = Naming(
    name="dcgm",
    namespace="namespace",
    pod="pod",
    container="container",
    gpu="UUID",
    gpu_label="gpu",
    gpu_legend="GPU {{gpu}}",
    model="modelName",
    whole='GPU_I_ID=""',
    mig='GPU_I_ID!=""',
    profile="GPU_I_PROFILE",
    env_default="env_TEAM",
    business_help=(
        "A label the container_env processor adds, in dcgm-exporter's spelling: env_TEAM for "
        "env: {include: [TEAM]} (label_* for container labels, annotation_* for pod "
        "annotations, and a pod label under its own sanitized key, e.g. team)."
    ),
)
NAMINGS = (OTEL, DCGM)


@dataclass(frozen=True)
class Query:
    """One target: its query and legend in naming otel, and in dcgm where they differ."""

    otel: str
    legend: str = ""
    dcgm: str = ""
    dcgm_legend: str = ""

    def expr(self, naming: Naming) -> str:
        return naming.fill(self.dcgm if naming is DCGM and self.dcgm else self.otel)

    def legend_for(self, naming: Naming) -> str:
        legend = self.dcgm_legend if naming is DCGM and self.dcgm_legend else self.legend
        return naming.fill(legend) if legend else "__auto"


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"  # timeseries | stat | bargauge
    width: int = 12
    height: int = 8
    ratio: bool = False  # a 0..1 axis
    bars: bool = False
    dcgm_description: str = ""


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


HOLDER = "{{%node%}} %gname% {{%ns%}}/{{%pod%}}"
# Memory used as a fraction of the framebuffer, whose size is used + free + reserved (the
# metrics on by default; the limit metric is opt-in). `sel` is the selector's inside.
MEMORY_USED = (
    "hw_gpu_memory_usage_bytes{%(sel)s} / (hw_gpu_memory_usage_bytes{%(sel)s} "
    "+ nvidia_gpu_memory_free_bytes{%(sel)s} + nvidia_gpu_memory_reserved_bytes{%(sel)s})"
)
FB_USED = (
    "DCGM_FI_DEV_FB_USED{%(sel)s} / (DCGM_FI_DEV_FB_USED{%(sel)s} "
    "+ DCGM_FI_DEV_FB_FREE{%(sel)s} + DCGM_FI_DEV_FB_RESERVED{%(sel)s})"
)
WORKLOAD_ROWS = ("GPUs", "Health and throttling", "MIG", "Time-slicing", "Chargeback")


def _stat(title: str, description: str, unit: str, query: Query, **kw: Any) -> Panel:
    return Panel(title, description, unit, (query,), kind="stat", width=4, height=4, **kw)


ROWS = (
    Row(
        "Fleet",
        (
            _stat(
                "GPUs",
                "Whole GPUs answering on the selected nodes (MIG instances not counted).",
                "none",
                Query("count(nvidia_gpu_up{%whole%,%N%} == 1)"),
            ),
            _stat(
                "GPUs lost",
                "GPUs NVML reports lost (nvidia_gpu_up 0): they need a reset or the node a reboot.",
                "none",
                Query("count(nvidia_gpu_up{%whole%,%N%} == 0) or vector(0)"),
            ),
            _stat(
                "GPUs not ok",
                "GPUs whose health summary (nvidia_gpu_up's hw_state) is degraded or failed; "
                "the Health row says why.",
                "none",
                Query('count(nvidia_gpu_up{hw_state!="ok",%whole%,%N%}) or vector(0)'),
            ),
            _stat(
                "GPUs allocated",
                "Whole GPUs the kubelet allocated to containers, in GPUs (a time-sliced GPU "
                "counts once, split between its holders).",
                "none",
                Query("sum(nvidia_gpu_allocation_ratio{%whole%,%N%})"),
            ),
            _stat(
                "Average utilization",
                "Mean fraction of time a kernel ran, over the selected GPUs.",
                "percentunit",
                Query(
                    'avg(hw_gpu_utilization_ratio{hw_gpu_task="general",%N%})',
                    dcgm="avg(DCGM_FI_DEV_GPU_UTIL{%N%}) / 100",
                ),
            ),
            _stat(
                "Power",
                "Power drawn by the selected GPUs.",
                "watt",
                Query("sum(hw_power_watts{%N%})", dcgm="sum(DCGM_FI_DEV_POWER_USAGE{%N%})"),
            ),
            Panel(
                "Utilization by node",
                "Mean GPU utilization of each node.",
                "percentunit",
                (
                    Query(
                        'avg by (%node%) (hw_gpu_utilization_ratio{hw_gpu_task="general",%N%})',
                        "{{%node%}}",
                        dcgm="avg by (%node%) (DCGM_FI_DEV_GPU_UTIL{%N%}) / 100",
                    ),
                ),
                ratio=True,
            ),
            Panel(
                "GPUs by model and health",
                "Whole GPUs per model (bars) and per health state.",
                "none",
                (
                    Query("count by (%model%) (nvidia_gpu_up{%whole%,%N%})", "{{%model%}}"),
                    Query(
                        "count by (hw_state) (nvidia_gpu_up{%whole%,%N%})",
                        "{{hw_state}}",
                    ),
                ),
                kind="bargauge",
            ),
        ),
    ),
    Row(
        "GPUs",
        (
            Panel(
                "GPU utilization",
                "Fraction of time a kernel ran (hw.gpu.utilization). A GPU shared by several "
                "pods is one series without pod labels (see the Time-slicing row).",
                "percentunit",
                (
                    Query(
                        'hw_gpu_utilization_ratio{hw_gpu_task="general",%F%}',
                        HOLDER,
                        dcgm="DCGM_FI_DEV_GPU_UTIL{%F%} / 100",
                    ),
                ),
                ratio=True,
                dcgm_description="DCGM_FI_DEV_GPU_UTIL (percent) as a fraction. A GPU shared "
                "by several pods is one series without pod labels (see the Time-slicing row).",
            ),
            Panel(
                "GPU memory used",
                "Framebuffer in use against the GPU's total (hw.gpu.memory.usage / (usage + "
                "nvidia.gpu.memory.free + nvidia.gpu.memory.reserved)); MIG instances against "
                "their own share.",
                "percentunit",
                (Query(MEMORY_USED % {"sel": "%F%"}, HOLDER, dcgm=FB_USED % {"sel": "%F%"}),),
                ratio=True,
                dcgm_description="DCGM_FI_DEV_FB_USED / (FB_USED + DCGM_FI_DEV_FB_FREE + "
                "DCGM_FI_DEV_FB_RESERVED); MIG instances against their own share.",
            ),
            Panel(
                "GPU memory used (bytes)",
                "hw.gpu.memory.usage.",
                "bytes",
                (
                    Query(
                        "hw_gpu_memory_usage_bytes{%F%}",
                        HOLDER,
                        dcgm="DCGM_FI_DEV_FB_USED{%F%} * 1048576",
                    ),
                ),
                dcgm_description="DCGM_FI_DEV_FB_USED (MiB) in bytes.",
            ),
            Panel(
                "Power",
                "Power draw (hw.power).",
                "watt",
                (Query("hw_power_watts{%F%}", HOLDER, dcgm="DCGM_FI_DEV_POWER_USAGE{%F%}"),),
                dcgm_description="Power draw (DCGM_FI_DEV_POWER_USAGE).",
            ),
            Panel(
                "Temperature",
                "GPU core (hw.temperature, hw.sensor_location=gpu) and HBM "
                "(hw.sensor_location=memory) temperature.",
                "celsius",
                (
                    Query(
                        'hw_temperature_celsius{hw_sensor_location="gpu",%F%}',
                        "core " + HOLDER,
                        dcgm="DCGM_FI_DEV_GPU_TEMP{%F%}",
                    ),
                    Query(
                        'hw_temperature_celsius{hw_sensor_location="memory",%F%}',
                        "memory " + HOLDER,
                        dcgm="DCGM_FI_DEV_MEMORY_TEMP{%F%}",
                    ),
                ),
                dcgm_description="GPU core (DCGM_FI_DEV_GPU_TEMP) and HBM "
                "(DCGM_FI_DEV_MEMORY_TEMP) temperature.",
            ),
            Panel(
                "XID errors",
                "XID errors per code in each interval (nvidia.gpu.xid.errors); counted from "
                "NVML events since the agent started.",
                "short",
                (
                    Query(
                        "sum by (%node%, hw_name, nvidia_xid_code, %ns%, %pod%) "
                        "(increase(nvidia_gpu_xid_errors_total{%F%}[$__rate_interval]))",
                        "XID {{nvidia_xid_code}} " + HOLDER,
                        dcgm="max by (%node%, gpu, err_code, err_msg, %ns%, %pod%) "
                        "(DCGM_FI_DEV_XID_ERRORS{%F%})",
                        dcgm_legend="XID {{err_code}} {{err_msg}} " + HOLDER,
                    ),
                ),
                bars=True,
                dcgm_description="The latest XID code of each GPU (DCGM_FI_DEV_XID_ERRORS: "
                'one series per GPU, 0 "No Error" before its first XID). naming: otel counts '
                "each occurrence.",
            ),
        ),
    ),
    Row(
        "Health and throttling",
        (
            Panel(
                "GPU health",
                "GPUs whose health summary is not ok (nvidia_gpu_up's hw_state), with the "
                "reasons: "
                "clock_hw_slowdown, clock_hw_thermal, clock_hw_power_brake, clock_sw_thermal "
                "(clocks held down), pcie_*, nvlink_down, *_pending, row_remap_failure, xid_N "
                "(docs/migrating-from-dcgm-exporter.md, GPU health rules).",
                "none",
                (
                    Query(
                        "count by (%node%, %glabel%, hw_state, nvidia_gpu_health_reason) "
                        '(nvidia_gpu_up{hw_state!="ok",%F%})',
                        "{{%node%}} %gname% {{hw_state}}: {{nvidia_gpu_health_reason}}",
                    ),
                ),
            ),
            Panel(
                "SM clock",
                "Each GPU's SM clock (nvidia.gpu.sm.clock): a clock that drops while the GPU is "
                "busy is held down; GPU health names the reason once it lasts.",
                "hertz",
                (
                    Query(
                        "nvidia_gpu_sm_clock_hertz{%F%}",
                        HOLDER,
                        dcgm="DCGM_FI_DEV_SM_CLOCK{%F%} * 1000000",
                    ),
                ),
                dcgm_description="Each GPU's SM clock (DCGM_FI_DEV_SM_CLOCK, MHz, in Hz): a "
                "clock that drops while the GPU is busy is held down; GPU health names the "
                "reason once it lasts.",
            ),
        ),
    ),
    Row(
        "MIG",
        (
            Panel(
                "MIG instances by profile",
                "MIG instances per node and profile.",
                "none",
                (
                    Query(
                        "count by (%node%, %profile%) (nvidia_gpu_up{%mig%,%F%})",
                        "{{%node%}} {{%profile%}}",
                    ),
                ),
            ),
            Panel(
                "MIG instances allocated by namespace",
                "MIG instances the kubelet allocated, per namespace and profile.",
                "none",
                (
                    Query(
                        "sum by (%ns%, %profile%) (nvidia_gpu_allocation_ratio{%mig%,%F%})",
                        "{{%ns%}} {{%profile%}}",
                    ),
                ),
            ),
            Panel(
                "MIG instance memory used",
                "Each instance's framebuffer in use against its own share.",
                "percentunit",
                (
                    Query(
                        MEMORY_USED % {"sel": "%mig%,%F%"},
                        "{{%node%}} {{hw_name}} {{%profile%}} {{%ns%}}/{{%pod%}}",
                        dcgm=FB_USED % {"sel": "%mig%,%F%"},
                        dcgm_legend="{{%node%}} GPU {{gpu}} GI {{GPU_I_ID}} {{%profile%}} "
                        "{{%ns%}}/{{%pod%}}",
                    ),
                ),
                ratio=True,
            ),
            Panel(
                "MIG instance engine activity",
                "Fraction of time the instance's graphics/compute engine was active "
                "(nvidia.gpu.graphics.active; GPM, Hopper and later).",
                "percentunit",
                (
                    Query(
                        "nvidia_gpu_graphics_active_ratio{%mig%,%F%}",
                        "{{%node%}} {{hw_name}} {{%profile%}} {{%ns%}}/{{%pod%}}",
                        dcgm="DCGM_FI_PROF_GR_ENGINE_ACTIVE{%mig%,%F%}",
                        dcgm_legend="{{%node%}} GPU {{gpu}} GI {{GPU_I_ID}} {{%profile%}} "
                        "{{%ns%}}/{{%pod%}}",
                    ),
                ),
                ratio=True,
            ),
        ),
    ),
    Row(
        "Time-slicing",
        (
            Panel(
                "Holders per shared GPU",
                "Containers sharing each time-sliced (or MPS) GPU: each has an allocation "
                "series of 1/N.",
                "none",
                (
                    Query(
                        "count by (%node%, %gpu%) (nvidia_gpu_allocation_ratio{%whole%,%F%} < 1)",
                        "{{%node%}} {{%gpu%}}",
                    ),
                ),
            ),
            Panel(
                "Shared GPU utilization",
                "Utilization of the shared GPUs the selected pods hold (the device's series "
                "carries no holder; its allocation series do). Each pod's own use of it is "
                "nvidia.gpu.process.utilization, opt-in (docs/prometheus.md).",
                "percentunit",
                (
                    Query(
                        'hw_gpu_utilization_ratio{hw_gpu_task="general",nvidia_gpu_shared="true",%N%} '
                        "and on (hw_id) nvidia_gpu_allocation_ratio{%F%}",
                        "{{%node%}} {{hw_name}}",
                        dcgm='DCGM_FI_DEV_GPU_UTIL{nvidia_gpu_shared="true",%N%} / 100 '
                        "and on (UUID) nvidia_gpu_allocation_ratio{%whole%,%F%}",
                        dcgm_legend="{{%node%}} GPU {{gpu}}",
                    ),
                ),
                ratio=True,
            ),
        ),
    ),
    Row(
        "Chargeback",
        (
            Panel(
                "GPUs allocated by namespace",
                "GPUs allocated to each namespace (nvidia_gpu_allocation_ratio: 1 for a whole "
                "GPU or MIG instance, 1/N on a GPU N containers share).",
                "none",
                (
                    Query(
                        "sum by (%ns%) (nvidia_gpu_allocation_ratio{%F%})",
                        "{{%ns%}}",
                    ),
                ),
            ),
            Panel(
                "Power by holder (shared GPUs split 1/N)",
                "Each GPU's power split between the containers it is allocated to, so the "
                "lines add up to the power of the allocated GPUs. MIG instances have no power "
                "reading of their own.",
                "watt",
                (
                    Query(
                        "hw_power_watts * on (hw_id) group_right () nvidia_gpu_allocation_ratio{%F%}",
                        "{{%ns%}}/{{%pod%}}/{{%ctr%}} {{hw_id}}",
                        dcgm="DCGM_FI_DEV_POWER_USAGE * on (UUID) group_right () "
                        "nvidia_gpu_allocation_ratio{%whole%,%F%}",
                        dcgm_legend="{{%ns%}}/{{%pod%}}/{{%ctr%}} {{UUID}}",
                    ),
                ),
            ),
            Panel(
                "GPU-hours by namespace (time range)",
                "GPUs allocated times hours, over the dashboard's time range (recorded hourly "
                "by otelgpu:gpu_hours:holder_1h; MIG instances apart).",
                "none",
                (
                    Query(
                        "sort_desc(sum by (%ns%) "
                        "(sum_over_time(otelgpu:gpu_hours:holder_1h{%F%}[$__range:1h])))",
                        "{{%ns%}}",
                    ),
                ),
                kind="bargauge",
            ),
            Panel(
                "GPU-hours by business label (time range)",
                "GPU-hours over the time range, by the business label chosen above.",
                "none",
                (
                    Query(
                        "sort_desc(sum by ($env_label) "
                        "(sum_over_time(otelgpu:gpu_hours:holder_1h{%F%}[$__range:1h])))",
                    ),
                ),
                kind="bargauge",
            ),
            Panel(
                "Energy by namespace (time range)",
                "GPU energy over the time range, each GPU's split between its holders "
                "(otelgpu:hw_energy_joules:holder_1h), in kWh.",
                "kwatth",
                (
                    Query(
                        "sort_desc(sum by (%ns%) (sum_over_time("
                        "otelgpu:hw_energy_joules:holder_1h{%F%}[$__range:1h])) / 3600000)",
                        "{{%ns%}}",
                    ),
                ),
                kind="bargauge",
            ),
            Panel(
                "Energy by business label (time range)",
                "GPU energy over the time range by the business label chosen above, in kWh.",
                "kwatth",
                (
                    Query(
                        "sort_desc(sum by ($env_label) (sum_over_time("
                        "otelgpu:hw_energy_joules:holder_1h{%F%}[$__range:1h])) / 3600000)",
                    ),
                ),
                kind="bargauge",
            ),
        ),
    ),
    Row(
        "Agent health (why is a label empty?)",
        (
            Panel(
                "Sources up",
                "otelgpu_source_up: 1 while the agent reaches NVML, the kubelet's "
                "pod-resources API and the container runtime. 0 means GPU series are missing "
                "(nvml) or lack pod / business labels.",
                "short",
                (Query("otelgpu_source_up{%N%}", "{{%node%}} {{source}}"),),
                ratio=True,
            ),
            Panel(
                "Seconds since each source last answered",
                "time() - otelgpu_source_last_success_timestamp_seconds; grows while a source "
                "is down.",
                "s",
                (
                    Query(
                        "time() - (otelgpu_source_last_success_timestamp_seconds{%N%} > 0)",
                        "{{%node%}} {{source}}",
                    ),
                ),
            ),
            Panel(
                "Unlabelled GPU points",
                "rate(otelgpu_enrichment_unmatched_points_total) by processor and reason. "
                "not_allocated (idle GPU) is normal; runtime_down, no_snapshot, unknown_device "
                "and container_not_found mean labels are missing (docs/deploy.md).",
                "pps",
                (
                    Query(
                        "sum by (%node%, processor, reason) "
                        "(rate(otelgpu_enrichment_unmatched_points_total{%N%}[$__rate_interval]))",
                        "{{%node%}} {{processor}} {{reason}}",
                    ),
                ),
            ),
            Panel(
                "Export failures",
                "Points the exporters gave up on (otelgpu_exporter_failed_points_total), e.g. "
                "while the OTLP gateway is unreachable and the queue is full.",
                "pps",
                (
                    Query(
                        "sum by (%node%, exporter) "
                        "(rate(otelgpu_exporter_failed_points_total{%N%}[$__rate_interval]))",
                        "{{%node%}} {{exporter}}",
                    ),
                ),
            ),
            Panel(
                "OTLP sending queue",
                "What waits in each push exporter's sending queue (otelgpu_exporter_queue_size, "
                "in the unit of its sizer). It should drain to 0 between collections.",
                "short",
                (Query("otelgpu_exporter_queue_size{%N%}", "{{%node%}} {{exporter}}"),),
            ),
        ),
    ),
)


def _field_config(panel: Panel) -> Json:
    defaults: Json = {"unit": panel.unit}
    if panel.kind == "timeseries":
        custom: Json = {"lineWidth": 1, "fillOpacity": 10}
        if panel.bars:
            custom = {"drawStyle": "bars", "fillOpacity": 80, "lineWidth": 1}
        defaults["custom"] = custom
    if panel.ratio:
        defaults |= {"min": 0, "max": 1}
    if panel.kind == "stat":
        defaults["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": "green", "value": None}],
        }
    return {"defaults": defaults, "overrides": []}


def _options(panel: Panel) -> Json:
    reduce = {"calcs": ["lastNotNull"], "fields": "", "values": False}
    if panel.kind == "stat":
        return {"reduceOptions": reduce, "colorMode": "value", "graphMode": "area"}
    if panel.kind == "bargauge":
        return {"reduceOptions": reduce, "orientation": "horizontal", "displayMode": "gradient"}
    return {
        "legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _targets(panel: Panel, naming: Naming) -> list[Json]:
    targets = []
    for query in panel.queries:
        expr = query.expr(naming)
        if not expr:
            continue  # a query only the other naming needs
        target: Json = {
            "refId": chr(ord("A") + len(targets)),
            "datasource": DATASOURCE,
            "expr": expr,
            "legendFormat": query.legend_for(naming),
        }
        if panel.kind == "bargauge":
            target |= {"instant": True, "range": False}
        targets.append(target)
    return targets


def _panels(naming: Naming) -> list[Json]:
    out: list[Json] = []
    y = 0
    for row in ROWS:
        out.append(
            {
                "type": "row",
                "title": row.title,
                "id": len(out) + 1,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        y += 1
        x = 0
        height = 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y = 0, y + height
            description = (
                panel.dcgm_description
                if naming is DCGM and panel.dcgm_description
                else panel.description
            )
            out.append(
                {
                    "type": panel.kind,
                    "title": panel.title,
                    "description": description,
                    "id": len(out) + 1,
                    "datasource": DATASOURCE,
                    "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
                    "fieldConfig": _field_config(panel),
                    "options": _options(panel),
                    "targets": _targets(panel, naming),
                }
            )
            x += panel.width
            height = panel.height
        y += height
    return out


def _query_variable(name: str, label: str, query: str) -> Json:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-query", "qryType": 1},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def _variables(naming: Naming) -> list[Json]:
    held = "nvidia_gpu_allocation_ratio"
    ns, pod, ctr = naming.namespace, naming.pod, naming.container
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
        },
        _query_variable("node", "Node", "label_values(nvidia_gpu_up, k8s_node_name)"),
        _query_variable(
            "namespace", "Namespace", f'label_values({held}{{k8s_node_name=~"$node"}}, {ns})'
        ),
        _query_variable(
            "pod",
            "Pod",
            f'label_values({held}{{k8s_node_name=~"$node",{ns}=~"$namespace"}}, {pod})',
        ),
        _query_variable(
            "container",
            "Container",
            f'label_values({held}{{k8s_node_name=~"$node",{ns}=~"$namespace",{pod}=~"$pod"}}, '
            f"{ctr})",
        ),
        {
            "name": "env_label",
            "label": "Business label",
            "type": "textbox",
            "description": naming.business_help,
            "query": naming.env_default,
            "current": {"text": naming.env_default, "value": naming.env_default},
        },
        _query_variable(
            "env_value",
            "Value",
            f'label_values({held}{{k8s_node_name=~"$node",{ns}=~"$namespace"}}, $env_label)',
        ),
    ]


_DESCRIPTIONS = {
    "otel": "GPU metrics from otelgpu with naming: otel (the prometheus exporter's default): "
    "hw_* / nvidia_gpu_* series with k8s_* and container_env_* labels. For naming: dcgm use "
    "otelgpu-gpus-dcgm.json.",
    "dcgm": "GPU metrics from otelgpu with naming: dcgm: dcgm-exporter's DCGM_FI_* names and "
    "units, with its pod, namespace, container and env_* labels. For naming: otel use "
    "otelgpu-gpus.json.",
}


def dashboard(naming: Naming) -> Json:
    """The whole dashboard for one naming."""
    suffix = "" if naming is OTEL else "-dcgm"
    return {
        "title": "otelgpu: GPUs by workload" + ("" if naming is OTEL else " (naming: dcgm)"),
        "uid": "otelgpu-gpus" + suffix,
        "description": _DESCRIPTIONS[naming.name],
        "tags": ["otelgpu", "gpu", "nvidia"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "browser",
        "graphTooltip": 1,
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": _variables(naming)},
        "panels": _panels(naming),
    }


def file_name(naming: Naming) -> str:
    return "otelgpu-gpus.json" if naming is OTEL else "otelgpu-gpus-dcgm.json"


def text(naming: Naming) -> str:
    """The dashboard file's text."""
    return json.dumps(dashboard(naming), indent=2, ensure_ascii=False) + "\n"
