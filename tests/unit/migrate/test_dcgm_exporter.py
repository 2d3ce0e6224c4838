"""`otelgpu migrate dcgm-exporter`: every flag carried over or refused with a reason, and the
pipeline it writes loads in the real config loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.cli import main
from otelgpu.config import load_config
from otelgpu.migrate import dcgm_chart, dcgm_exporter, dcgm_pipeline
from otelgpu.migrate.dcgm_flags import BY_NAME, FLAGS, parse_args, parse_env
from otelgpu.service.builtins import builtin_registry

DEFAULT_CSV = Path(__file__).parents[1] / "receivers/nvml/testdata/default-counters.csv"
# dcgm-exporter's flags (pkg/cmd/app.go): 37 everywhere, and --web-systemd-socket on Linux.
DCGM_FLAG_COUNT = 38
# dcgm-exporter's chart values (deployment/values.yaml): its metrics ConfigMap, mounted where
# its `-f` argument points.
DCGM_CHART_MOUNT = {
    "extraConfigMapVolumes": [
        {"name": "exporter-metrics-volume",
         "configMap": {"name": "exporter-metrics-config-map",
                       "items": [{"key": "metrics", "path": "default-counters.csv"}]}}
    ],
    "extraVolumeMounts": [
        {"name": "exporter-metrics-volume", "subPath": "default-counters.csv",
         "mountPath": "/etc/dcgm-exporter/default-counters.csv"}
    ],
}  # fmt: skip


def migrated(
    tmp_path: Path,
    argv: list[str],
    environ: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The pipeline file (loaded by the real loader) and the chart values of a migration."""
    migration = dcgm_exporter.migrate(argv, environ or {}, values)
    pipeline, chart = dcgm_exporter.render(migration)
    path = tmp_path / "pipeline.yaml"
    path.write_text(pipeline)
    overrides = []
    nvml = yaml.safe_load(pipeline)["receivers"]["nvml"]
    if nvml.get("counters_csv") == dcgm_pipeline.CHART_COUNTERS:  # where the chart mounts it
        overrides = [f"receivers.nvml.counters_csv={DEFAULT_CSV}"]
    load_config([str(path)], builtin_registry(), overrides)  # ConfigError unless it validates
    return pipeline, yaml.safe_load(chart)


def test_every_flag_has_an_equivalent_or_a_reason() -> None:
    assert len(FLAGS) == DCGM_FLAG_COUNT
    for flag in FLAGS:
        assert bool(flag.otelgpu) != bool(flag.reason), flag.name
        assert flag.env, flag.name


@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f.name)
def test_each_flag_given_alone_migrates_to_a_valid_pipeline_with_a_comment(
    flag: Any, tmp_path: Path
) -> None:
    samples = {"bool": "true", "int": "60000", "list": "nvidia.com/a100", "string": ""}
    special = {
        "collectors": str(DEFAULT_CSV), "address": "127.0.0.1:9500", "devices": "g:0",
        "kubernetes-gpu-id-type": "device-name", "log-format": "json",
        "configmap-data": "gpu-operator:my-counters", "hpc-job-mapping-dir": "/var/run/jobs",
        "pod-resources-kubelet-socket": "/var/snap/k8s/pod-resources/kubelet.sock",
        "web-config-file": "/nonexistent/web.yaml", "cpu-devices": "g", "switch-devices": "g",
        "remote-hostengine-info": "10.0.0.1:5555", "dcgm-log-level": "DEBUG",
        "dump-directory": "/tmp/d", "gpu-bind-unbind-poll-interval": "2s",
        "kubernetes-pod-label-allowlist-regex": "^team$",
    }  # fmt: skip
    value = special.get(flag.name, samples[flag.kind])
    pipeline, _ = migrated(tmp_path, [f"--{flag.name}={value}"])
    comment = next(line for line in pipeline.splitlines() if line.startswith(f"# --{flag.name}="))
    if flag.reason:
        assert comment.endswith(f"no equivalent: {flag.reason}")


def test_a_kubernetes_daemonset_command_line(tmp_path: Path) -> None:
    pipeline, chart = migrated(
        tmp_path,
        ["-f", str(DEFAULT_CSV), "-c", "5000", "-k", "--kubernetes-enable-pod-labels",
         "--kubernetes-pod-label-allowlist-regex", r"^team$,^app\.kubernetes\.io/.*,x(y|z)",
         "-a", ":9500", "--nvidia-resource-names", "nvidia.com/a100", "-o"],
        {"DCGM_EXPORTER_NO_HOSTNAME": "true", "DCGM_EXPORTER_INTERVAL": "1000",
         "DCGM_EXPORTER_BOGUS": "1"},
    )  # fmt: skip
    config = yaml.safe_load(pipeline)
    assert config["receivers"]["nvml"] == {
        "collection_interval": "5s",  # the flag wins over $DCGM_EXPORTER_INTERVAL
        "counters_csv": str(DEFAULT_CSV),
    }
    assert config["exporters"]["prometheus"] == {"endpoint": "0.0.0.0:9500", "naming": "dcgm"}
    processors = config["processors"]
    assert processors["container_env"] == {
        "pod_labels": {"include": ["team", "app.kubernetes.io/*"]}
    }
    assert processors["k8s_attributes"]["resource_names"] == [
        "nvidia.com/gpu",
        "nvidia.com/mig-*",
        "nvidia.com/a100",
    ]
    assert processors["resource"] == {"attributes": [{"key": "host.name", "action": "delete"}]}
    assert (
        "# --kubernetes-pod-label-allowlist-regex: 'x(y|z)' is a regex otelgpu cannot take"
        in pipeline
    )
    assert "# $DCGM_EXPORTER_BOGUS: not a variable dcgm-exporter reads; ignored" in pipeline
    assert "# --use-old-namespace=true: no equivalent: otelgpu has no 1.x names" in pipeline
    # The chart has no value for the resource names or no-hostname: it runs the pipeline.
    assert chart["counters"] == DEFAULT_CSV.read_text()
    assert chart["service"] == {"port": 9500}
    given = yaml.safe_load(chart["pipeline"]["config"])
    assert given["receivers"]["nvml"]["counters_csv"] == "/etc/otelgpu-counters/counters.csv"
    assert given["service"]["extensions"] == ["health_check"]


def test_the_default_counters_path_of_dcgm_exporters_image_is_the_default_metric_set(
    tmp_path: Path,
) -> None:
    pipeline, chart = migrated(tmp_path, ["-f", "/etc/dcgm-exporter/default-counters.csv"])
    assert yaml.safe_load(pipeline)["receivers"]["nvml"]["metric_set"] == "default"
    assert "counters" not in chart and chart["collectionInterval"] == "30s"


def test_dcgm_exporter_chart_values(tmp_path: Path) -> None:
    values = {
        **DCGM_CHART_MOUNT,
        "customMetrics": "DCGM_FI_DEV_GPU_UTIL, gauge, util\n",
        "service": {"port": 9400, "address": ":9400"},
        "serviceMonitor": {"enabled": True, "interval": "30s", "additionalLabels": {"release": "kps"}},
        "kubernetes": {"enablePodLabels": True, "podLabelAllowlistRegex": ["^team$"]},
        "extraEnv": [{"name": "DCGM_EXPORTER_INTERVAL", "value": "15000"}],
        "tlsServerConfig": {"enabled": True, "existingSecret": "dcgm-tls"},
        "debugDump": {"enabled": True},
        "tolerations": [{"operator": "Exists"}],
    }  # fmt: skip
    pipeline, chart = migrated(tmp_path, [], {"DCGM_EXPORTER_INTERVAL": "1"}, values)
    config = yaml.safe_load(pipeline)
    assert config["receivers"]["nvml"]["collection_interval"] == "15s"  # the chart's env
    assert "k8s_attributes" in config["processors"]  # its chart runs with --kubernetes
    assert chart["counters"] == "DCGM_FI_DEV_GPU_UTIL, gauge, util\n"
    assert chart["containerEnv"] == {"podLabels": ["team"]}
    assert chart["serviceMonitor"] == {
        "enabled": True,
        "interval": "30s",
        "additionalLabels": {"release": "kps"},
    }
    assert chart["prometheus"] == {"tls": {"secretName": "dcgm-tls", "clientCA": False}}
    assert chart["tolerations"] == [dcgm_chart.GPU_TOLERATION, {"operator": "Exists"}]
    assert "# --dump-enabled=true: no equivalent: otelgpu writes no dump files" in pipeline


@pytest.mark.parametrize(
    ("argv", "environ", "label"),
    [
        (["--kubernetes-enable-pod-uid"], {}, "pod_uid"),
        ([], {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID": "true"}, "pod_uid"),
        (["--kubernetes-enable-dra"], {}, "dra"),
        ([], {"KUBERNETES_ENABLE_DRA": "true"}, "dra"),
    ],
)
def test_pod_uid_and_dra_labels_become_the_dcgm_label_options(
    tmp_path: Path, argv: list[str], environ: dict[str, str], label: str
) -> None:
    pipeline, chart = migrated(tmp_path, argv, environ)
    assert yaml.safe_load(pipeline)["exporters"]["prometheus"]["dcgm_labels"] == {label: True}
    assert f"dcgm_labels: {{{label}: true}}" in pipeline
    # The chart has no value for it: its values carry the whole pipeline.
    assert "dcgm_labels" in chart["pipeline"]["config"]


@pytest.mark.parametrize(
    ("argv", "nvml"),
    [
        (["-d", "f"], {"dcgm_devices": "flex"}),
        (["--devices", "g:0,2-3"], {"dcgm_devices": "gpus", "devices": [0, 2, 3]}),
        (["-d", "i"], {"dcgm_devices": "instances"}),
    ],
)
def test_the_device_set_becomes_the_receivers_dcgm_devices(
    tmp_path: Path, argv: list[str], nvml: dict[str, Any]
) -> None:
    pipeline, _ = migrated(tmp_path, argv, {})
    receiver = yaml.safe_load(pipeline)["receivers"]["nvml"]
    assert {key: receiver.get(key) for key in nvml} == nvml


def test_the_counters_dcgm_exporters_chart_mounts(tmp_path: Path) -> None:
    # Its default: the chart's copy of the default counters, which metric_set default is.
    pipeline, chart = migrated(tmp_path, [], values=DCGM_CHART_MOUNT)
    assert yaml.safe_load(pipeline)["receivers"]["nvml"]["metric_set"] == "default"
    assert "counters" not in chart and "countersConfigMap" not in chart
    # A ConfigMap of the user's mounted there instead.
    own = {
        "extraConfigMapVolumes": [
            {"name": "mine", "configMap": {"name": "gpu-fields",
             "items": [{"key": "fields.csv", "path": "default-counters.csv"}]}}
        ],
        "extraVolumeMounts": [{"name": "mine", "subPath": "default-counters.csv",
                               "mountPath": "/etc/dcgm-exporter/default-counters.csv"}],
    }  # fmt: skip
    pipeline, chart = migrated(tmp_path, [], values=own)
    assert chart["countersConfigMap"] == {"name": "gpu-fields", "key": "fields.csv"}
    assert yaml.safe_load(pipeline)["receivers"]["nvml"]["counters_csv"] == (
        dcgm_pipeline.CHART_COUNTERS
    )
    # The image's other file, which customMetrics does not replace.
    values = {"arguments": ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"],
              "customMetrics": "DCGM_FI_DEV_GPU_UTIL, gauge, util\n", **DCGM_CHART_MOUNT}  # fmt: skip
    pipeline, chart = migrated(tmp_path, [], values=values)
    assert yaml.safe_load(pipeline)["receivers"]["nvml"]["metric_set"] == "default"
    assert "counters" not in chart


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-c", "soon"], "-c=soon: not a whole number"),
        (["--kubernetes=maybe"], "--kubernetes=maybe: not a boolean"),
        (["--nope"], "--nope: not a dcgm-exporter flag"),
        (["-f"], "-f needs a value"),
        (["stray"], "dcgm-exporter takes no arguments: 'stray'"),
        (["-d", "x:1"], "expected f, g[:IDS] or i[:IDS]"),
        (["-f", "/nonexistent/counters.csv"], "cannot read the counters CSV here"),
    ],
)
def test_what_dcgm_exporter_refuses_is_refused(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re_escape(message)):
        dcgm_exporter.migrate(argv, {})


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_go_flag_spellings() -> None:
    given = parse_args(["-collect-interval", "1000", "--f=x.csv", "-k=false", "-rbmn",
                        "--nvidia-resource-names", "a", "--nvidia-resource-names=b"])  # fmt: skip
    assert {n: g.value for n, g in given.items()} == {
        "collect-interval": "1000", "collectors": "x.csv", "kubernetes": "false",
        "replace-blanks-in-model-name": "true", "nvidia-resource-names": "a,b",
    }  # fmt: skip
    env, unknown = parse_env({"DCGM_EXPORTER_LISTEN": ":1", "NVIDIA_RESOURCE_NAMES": "c"})
    assert {n: g.origin for n, g in env.items()} == {
        "address": "$DCGM_EXPORTER_LISTEN",
        "nvidia-resource-names": "$NVIDIA_RESOURCE_NAMES",
    }
    assert unknown == [] and BY_NAME["rbmn"].name == "replace-blanks-in-model-name"


def test_the_cli_writes_the_pipeline_and_the_chart_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DCGM_EXPORTER_KUBERNETES", "true")
    values = tmp_path / "values.yaml"
    code = main(["migrate", "dcgm-exporter", "-f", str(DEFAULT_CSV), "--chart-values", str(values)])
    out = capsys.readouterr().out
    assert code == 0
    assert "# $DCGM_EXPORTER_KUBERNETES=true: the k8s_attributes processor" in out
    assert yaml.safe_load(values.read_text())["counters"] == DEFAULT_CSV.read_text()
    assert main(["migrate", "dcgm-exporter", "--bogus"]) == 2
    assert (
        "otelgpu migrate dcgm-exporter: --bogus: not a dcgm-exporter flag"
        in capsys.readouterr().err
    )
