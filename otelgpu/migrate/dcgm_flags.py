"""dcgm-exporter's flags and environment variables, and reading them as it does.

Facts from NVIDIA/dcgm-exporter `pkg/cmd/app.go`: each flag's name, short aliases, the
environment variables that set it, its kind and default. Its command line is parsed by
urfave/cli over Go's `flag` package: `-name` and `--name` are the same, a value follows as the
next argument or after `=`, a boolean takes no separate value (`--kubernetes`,
`--kubernetes=false`), a list flag is comma-separated and may repeat. A flag on the command
line wins over its environment variable, which wins over the default.

Each flag carries what otelgpu has in its place (`otelgpu`), or why it has nothing
(`reason`); `docs/migrating-from-dcgm-exporter.md`'s flag table is rendered from this list and a
test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BOOL, STRING, INT, LIST = "bool", "string", "int", "list"
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}  # Go's strconv.ParseBool
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


@dataclass(frozen=True, slots=True)
class Flag:
    """One dcgm-exporter flag. Exactly one of `otelgpu` (the equivalent) and `reason`."""

    name: str
    kind: str
    default: str
    env: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    otelgpu: str = ""
    reason: str = ""


_NO_DCGM = "otelgpu reads NVML in-process; there is no DCGM"
_NO_DUMP = (
    "otelgpu writes no dump files; `otelgpu print-config` shows what it runs with and the "
    "debug exporter what it sends"
)
_NO_BIND = (
    "DCGM's bind/unbind events; otelgpu finds the GPUs when NVML opens, and again on a reload "
    "(SIGHUP)"
)

FLAGS: tuple[Flag, ...] = (
    Flag("collectors", STRING, "/etc/dcgm-exporter/default-counters.csv",
         ("DCGM_EXPORTER_COLLECTORS",), ("f",),
         otelgpu="receivers::nvml::counters_csv (chart: counters)"),
    Flag("address", STRING, ":9400", ("DCGM_EXPORTER_LISTEN",), ("a",),
         otelgpu="exporters::prometheus::endpoint (chart: service.port)"),
    Flag("collect-interval", INT, "30000", ("DCGM_EXPORTER_INTERVAL",), ("c",),
         otelgpu="receivers::nvml::collection_interval (chart: collectionInterval)"),
    Flag("kubernetes", BOOL, "false", ("DCGM_EXPORTER_KUBERNETES",), ("k",),
         otelgpu="the k8s_attributes processor in the pipeline (always in the chart's)"),
    Flag("use-old-namespace", BOOL, "false", ("DCGM_EXPORTER_USE_OLD_NAMESPACE",), ("o",),
         reason="otelgpu has no 1.x names (dcgm_*): naming dcgm serves DCGM_FI_* names; "
         "rename in Prometheus (metric_relabel_configs) where 1.x names are still read"),
    Flag("cpu-devices", STRING, "f", ("DCGM_EXPORTER_CPU_DEVICES_STR",), ("p",),
         reason="CPU entities are DCGM's; otelgpu reads GPUs through NVML"),
    Flag("configmap-data", STRING, "none", ("DCGM_EXPORTER_CONFIGMAP_DATA",), ("m",),
         otelgpu="chart: countersConfigMap (its `metrics` key, mounted); a pipeline's "
         "receivers::nvml::counters_csv names the mounted file"),
    Flag("remote-hostengine-info", STRING, "localhost:5555", ("DCGM_REMOTE_HOSTENGINE_INFO",),
         ("r",), reason=_NO_DCGM + " host engine to connect to"),
    Flag("kubernetes-enable-pod-labels", BOOL, "false",
         ("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",),
         otelgpu="processors::container_env::pod_labels::include (chart: containerEnv.podLabels)"),
    Flag("kubernetes-enable-pod-uid", BOOL, "false", ("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",),
         otelgpu="exporters::prometheus::dcgm_labels: {pod_uid: true} (the uid from the "
         "pod's sandbox record)"),
    Flag("kubernetes-gpu-id-type", STRING, "uid", ("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",),
         otelgpu="processors::k8s_attributes::device_id_type (auto tells both apart per device)"),
    Flag("kubernetes-pod-label-allowlist-regex", LIST, "",
         ("DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",),
         otelgpu="processors::container_env::pod_labels::include (globs, not regexes)"),
    Flag("devices", STRING, "f", ("DCGM_EXPORTER_DEVICES_STR",), ("d",),
         otelgpu="receivers::nvml::dcgm_devices (f: flex, the default; g: gpus; i: instances) "
         "and receivers::nvml::devices (g's GPU indexes)"),
    Flag("no-hostname", BOOL, "false", ("DCGM_EXPORTER_NO_HOSTNAME",), ("n",),
         otelgpu="a resource processor deleting host.name"),
    Flag("switch-devices", STRING, "f", ("DCGM_EXPORTER_OTHER_DEVICES_STR",), ("s",),
         reason="NVSwitch entities are DCGM's; otelgpu reads GPUs through NVML"),
    Flag("fake-gpus", BOOL, "false", ("DCGM_EXPORTER_USE_FAKE_GPUS",),
         otelgpu="receivers::nvml::backend: simulated (with a simulated: block)"),
    Flag("web-config-file", STRING, "", ("DCGM_EXPORTER_WEB_CONFIG_FILE",),
         otelgpu="exporters::prometheus::tls and basic_auth (chart: prometheus.tls, "
         "prometheus.basicAuth)"),
    Flag("xid-count-window-size", INT, "300000", ("DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",),
         ("x",), reason="the window of DCGM_EXP_XID_ERRORS_COUNT; otelgpu counts XIDs for "
         "good (increase(...[WINDOW]) in PromQL is the window)"),
    Flag("replace-blanks-in-model-name", BOOL, "false",
         ("DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME",), ("rbmn",),
         reason="modelName is NVML's name as is; label_replace() in PromQL or a "
         "metric_relabel_config replaces blanks"),
    Flag("debug", BOOL, "false", ("DCGM_EXPORTER_DEBUG",),
         otelgpu="service::telemetry::logs::level: debug (or --log-level debug)"),
    Flag("clock-events-count-window-size", INT, "300000",
         ("DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE",),
         reason="the window of DCGM_EXP_CLOCK_EVENTS_COUNT; otelgpu serves the state per "
         "reason (changes(...[WINDOW]) in PromQL counts events)"),
    Flag("enable-dcgm-log", BOOL, "false", ("DCGM_EXPORTER_ENABLE_DCGM_LOG",),
         reason=_NO_DCGM + " log to write"),
    Flag("dcgm-log-level", STRING, "NONE", ("DCGM_EXPORTER_DCGM_LOG_LEVEL",),
         reason=_NO_DCGM + " log to write"),
    Flag("log-format", STRING, "text", ("DCGM_EXPORTER_LOG_FORMAT",),
         otelgpu="service::telemetry::logs::encoding: json (or --log-format json)"),
    Flag("pod-resources-kubelet-socket", STRING, "/var/lib/kubelet/pod-resources/kubelet.sock",
         ("DCGM_POD_RESOURCES_KUBELET_SOCKET",),
         otelgpu="processors::k8s_attributes::pod_resources_socket (chart: kubeletRoot)"),
    Flag("hpc-job-mapping-dir", STRING, "", ("DCGM_HPC_JOB_MAPPING_DIR",),
         otelgpu="the hpc_jobs processor's job_mapping_dir"),
    Flag("nvidia-resource-names", LIST, "", ("NVIDIA_RESOURCE_NAMES",),
         otelgpu="processors::k8s_attributes::resource_names"),
    Flag("kubernetes-virtual-gpus", BOOL, "false", ("KUBERNETES_VIRTUAL_GPUS",),
         otelgpu="exporters::prometheus::shared_gpu_series: per_holder"),
    Flag("dump-enabled", BOOL, "false", ("DCGM_EXPORTER_DUMP_ENABLED",), reason=_NO_DUMP),
    Flag("dump-directory", STRING, "/tmp/dcgm-exporter-debug", ("DCGM_EXPORTER_DUMP_DIRECTORY",),
         reason=_NO_DUMP),
    Flag("dump-retention", INT, "24", ("DCGM_EXPORTER_DUMP_RETENTION",), reason=_NO_DUMP),
    Flag("dump-compression", BOOL, "true", ("DCGM_EXPORTER_DUMP_COMPRESSION",), reason=_NO_DUMP),
    Flag("kubernetes-enable-dra", BOOL, "false", ("KUBERNETES_ENABLE_DRA",),
         otelgpu="exporters::prometheus::dcgm_labels: {dra: true} (k8s_attributes reads DRA "
         "claims beside device-plugin devices whatever it says)"),
    Flag("disable-startup-validate", BOOL, "false", ("DISABLE_STARTUP_VALIDATE",),
         otelgpu="nothing to set: otelgpu has no start-up checks to skip (without NVML it "
         "starts, reports the source down and retries)"),
    Flag("enable-gpu-bind-unbind-watch", BOOL, "false",
         ("DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH",), reason=_NO_BIND),
    Flag("gpu-bind-unbind-poll-interval", STRING, "1s",
         ("DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL",), reason=_NO_BIND),
    Flag("enable-pprof", BOOL, "false", ("DCGM_EXPORTER_ENABLE_PPROF",),
         reason="Go's profiler endpoints; otelgpu's own metrics (otelgpu_*) are on /metrics"),
    Flag("web-systemd-socket", BOOL, "false", ("DCGM_EXPORTER_SYSTEMD_SOCKET",),
         reason="systemd socket activation: otelgpu opens its listener itself "
         "(exporters::prometheus::endpoint)"),
)  # fmt: skip

BY_NAME: Mapping[str, Flag] = {name: flag for flag in FLAGS for name in (flag.name, *flag.aliases)}
BY_ENV: Mapping[str, Flag] = {env: flag for flag in FLAGS for env in flag.env}
# Read by dcgm-exporter, not a flag: the node's name in the Hostname label.
NODE_NAME_ENV = "NODE_NAME"


@dataclass(frozen=True, slots=True)
class Given:
    """A flag's value and where it came from (`--name`, `$ENV`, or a chart value)."""

    flag: Flag
    value: str
    origin: str


# `-d`'s letters (pkg/cmd/app.go, FlexKey, MajorKey, MinorKey) → receivers::nvml::dcgm_devices.
DEVICE_SETS = {"f": "flex", "g": "gpus", "i": "instances"}


def device_settings(given: Given) -> tuple[dict[str, Any], str]:
    """`-d`'s value → the nvml receiver settings under which `naming: dcgm` serves the devices
    dcgm-exporter would, and what to say about them. dcgm-exporter's `parseDeviceOptions`
    reads `f`, or `g` / `i` with an optional `:` list of IDs and `A-B` ranges; what it refuses
    is a ValueError here too. `g`'s IDs are DCGM GPU IDs, NVML's indexes; `i`'s are DCGM's
    GPU-instance entity IDs, which NVML has no number for: every instance is served then."""
    letter, has_ids, ids = given.value.partition(":")
    where = f"{given.origin} {given.value!r}"
    choice = DEVICE_SETS.get(letter)
    if choice is None or ":" in ids:
        raise ValueError(f"{where}: expected f, g[:IDS] or i[:IDS]")
    if letter == "f" and has_ids:
        raise ValueError(f"{where}: f takes no IDs (it serves every GPU or its instances)")
    settings: dict[str, Any] = {"dcgm_devices": choice}
    said = f"receivers::nvml::dcgm_devices: {choice}"
    if has_ids:
        indexes = _ids(ids, where)
        if letter == "g":
            settings["devices"] = indexes
            return settings, f"{said}, receivers::nvml::devices: {indexes}"
        return settings, (
            f"{said}; the IDs are DCGM's GPU-instance entity IDs, which NVML does not number: "
            "every MIG instance is served (drop the others in Prometheus)"
        )
    return settings, said


def _ids(ids: str, where: str) -> list[int]:
    """`0,2-4` → [0, 2, 3, 4], as dcgm-exporter reads a `-d` list."""
    out: list[int] = []
    for part in ids.split(","):
        first, dash, last = part.partition("-")
        try:
            out.extend(range(int(first), int(last) + 1) if dash else [int(first)])
        except ValueError:
            raise ValueError(f"{where}: {part!r} is not an ID or a range") from None
    return out


def flag_names(argv: Sequence[str]) -> list[str]:
    """The dcgm-exporter flags `argv` holds (as written), for telling them apart from ours."""
    out = []
    for arg in argv:
        if arg.startswith("-") and arg not in ("-", "--"):
            name = arg.lstrip("-").partition("=")[0]
            if name in BY_NAME:
                out.append(arg.partition("=")[0])
    return out


def parse_args(argv: Sequence[str]) -> dict[str, Given]:
    """dcgm-exporter's command line → the flags it sets; ValueError on what it would refuse."""
    given: dict[str, Given] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            if i < len(argv):
                raise ValueError(f"dcgm-exporter takes no arguments: {' '.join(argv[i:])}")
            break
        if not arg.startswith("-") or arg == "-":
            raise ValueError(f"dcgm-exporter takes no arguments: {arg!r}")
        name, has_value, value = arg.lstrip("-").partition("=")
        flag = BY_NAME.get(name)
        if flag is None:
            raise ValueError(f"{arg}: not a dcgm-exporter flag")
        if flag.kind == BOOL:
            value = value if has_value else "true"
        elif not has_value:
            if i >= len(argv):
                raise ValueError(f"{arg} needs a value")
            value = argv[i]
            i += 1
        value = _checked(flag, value, arg.partition("=")[0])
        if flag.kind == LIST and flag.name in given:
            value = f"{given[flag.name].value},{value}"
        given[flag.name] = Given(flag, value, f"--{flag.name}")
    return given


def parse_env(environ: Mapping[str, str]) -> tuple[dict[str, Given], list[str]]:
    """The flags set by `environ` (first of a flag's variables wins), and the DCGM_EXPORTER_*
    variables dcgm-exporter does not read."""
    given: dict[str, Given] = {}
    for flag in FLAGS:
        for env in flag.env:
            if env in environ:
                value = _checked(flag, environ[env], f"${env}")
                given[flag.name] = Given(flag, value, f"${env}")
                break
    unknown = sorted(k for k in environ if k.startswith("DCGM_EXPORTER_") and k not in BY_ENV)
    return given, unknown


def _checked(flag: Flag, value: str, where: str) -> str:
    if flag.kind == BOOL:
        if value in _TRUE:
            return "true"
        if value in _FALSE:
            return "false"
        raise ValueError(f"{where}={value}: not a boolean (true, false, 1, 0)")
    if flag.kind == INT:
        try:
            int(value)
        except ValueError:
            raise ValueError(f"{where}={value}: not a whole number") from None
    return value
