"""`otelgpu run` with dcgm-exporter's default counters CSV: /metrics serves exactly its fields,
in both namings, and a reload reads the file again."""

from __future__ import annotations

import re
import shutil
import signal
from pathlib import Path

import pytest

from otelgpu.receivers.nvml import counters_csv
from otelgpu.receivers.nvml.counters_select import select
from tests.integration.agent_process import AgentProcess, scrape, scrape_until
from tests.peers.ports import free_port

pytestmark = pytest.mark.integration

DEFAULT_CSV = Path(__file__).parents[1] / "unit/receivers/nvml/testdata/default-counters.csv"
PIPELINE = """\
receivers:
  nvml:
    backend: simulated
    collection_interval: 200ms
    simulated: {{gpus: 1}}
    counters_csv: {csv}
exporters:
  prometheus/dcgm: {{endpoint: "127.0.0.1:{dcgm}", naming: dcgm}}
  prometheus/otel: {{endpoint: "127.0.0.1:{otel}"}}
service:
  pipelines:
    metrics: {{receivers: [nvml], exporters: [prometheus/dcgm, prometheus/otel]}}
"""
# Served fields the simulated H100 may have no series for: bare metal has no vGPU licence, the
# driver version is a label, and the XID field may wait for a first XID.
NO_SERIES = {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DRIVER_VERSION"}


def exactly(found: set[str], listed: set[str]) -> None:
    """`found` is the `listed` fields: none missing (but those that may have no series), and
    none that is not listed."""
    assert found <= listed, f"not in the CSV: {sorted(found - listed)}"
    assert listed - NO_SERIES <= found, f"missing: {sorted(listed - NO_SERIES - found)}"


# Families every body has besides the GPUs' metrics: the info series and the agent's own.
OWN = re.compile(r"hw_gpu_info|otelgpu_\w+")


def families(body: str) -> set[str]:
    names = set(re.findall(r"^# TYPE (\S+)", body, re.M))
    return {n for n in names if not OWN.fullmatch(n)}


def test_metrics_serves_exactly_the_csv_fields_and_reload_rereads_it(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    csv_path = tmp_path / "counters.csv"
    shutil.copy(DEFAULT_CSV, csv_path)
    dcgm, otel = free_port(), free_port()
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(csv=csv_path, dcgm=dcgm, otel=otel))
    agent = AgentProcess("run", "-c", str(config))
    agents.append(agent)
    agent.wait_for(r"counters_csv: .*counters\.csv: 26 of 26 fields served, 0 not served")
    agent.wait_for(
        r"counters_csv: .*counters\.csv:88: DCGM_FI_PROF_GR_ENGINE_ACTIVE: .*profiling before Hopper needs DCGM"
    )

    rows = counters_csv.read(str(csv_path))
    listed = {r.field for r in rows}
    body = scrape_until(dcgm, "DCGM_FI_PROF_DRAM_ACTIVE")  # GPM answers from the 2nd cycle
    exactly(families(body), listed)
    assert re.search(r'^DCGM_FI_DEV_GPU_UTIL\{.*DCGM_FI_DRIVER_VERSION="', body, re.M)

    otel_body = scrape_until(otel, "nvidia_gpu_dram_active_ratio")
    otel_names = {
        "hw_gpu_utilization_ratio", "nvidia_gpu_memory_busy_ratio", "hw_gpu_memory_usage_bytes",
        "nvidia_gpu_memory_free_bytes", "nvidia_gpu_memory_reserved_bytes",
        "nvidia_gpu_sm_clock_hertz", "nvidia_gpu_memory_clock_hertz", "hw_temperature_celsius",
        "hw_power_watts", "hw_energy_joules_total", "nvidia_gpu_pcie_replay_total",
        "nvidia_gpu_pcie_tx_throughput_bytes_per_second",
        "nvidia_gpu_pcie_rx_throughput_bytes_per_second", "nvidia_gpu_nvlink_io_bytes_total",
        "nvidia_gpu_memory_remapped_rows_total", "nvidia_gpu_memory_row_remap_failure",
        "nvidia_gpu_graphics_active_ratio", "nvidia_gpu_tensor_active_ratio",
        "nvidia_gpu_dram_active_ratio",
    }  # fmt: skip
    assert otel_names <= families(otel_body)
    assert families(otel_body) - otel_names <= {"nvidia_gpu_xid_errors_total"}
    # The catalog metrics behind the CSV's fields, nothing else: the same set both ways.
    maybe = {"nvidia.gpu.xid.errors", "nvidia.gpu.vgpu.license.status"}
    assert len(select(str(csv_path), rows).metrics - maybe) == len(otel_names)

    # Reload: encoder and decoder utilization dropped, SM activity added.
    text = csv_path.read_text()
    text = re.sub(r"^DCGM_FI_DEV_(ENC|DEC)_UTIL.*\n", "", text, flags=re.M)
    csv_path.write_text(text + "DCGM_FI_PROF_SM_ACTIVE, gauge, SM activity\n")
    mark = len(agent.lines)
    agent.send(signal.SIGHUP)
    agent.wait_for(r"configuration reloaded", after=mark)
    body = scrape_until(dcgm, "DCGM_FI_PROF_SM_ACTIVE")
    changed = listed - {"DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"} | {"DCGM_FI_PROF_SM_ACTIVE"}
    exactly(families(body), changed)
    assert "DCGM_FI_DEV_ENC_UTIL" not in families(body)

    # A broken CSV at reload is refused with its line; the running pipelines keep going.
    csv_path.write_text("DCGM_FI_DEV_GPU_UTIL, gauge\n")
    mark = len(agent.lines)
    agent.send(signal.SIGHUP)
    agent.wait_for(
        r"reload rejected: .*receivers::nvml::counters_csv: .*counters\.csv:1: expected 3 columns",
        after=mark,
    )
    assert "DCGM_FI_PROF_SM_ACTIVE" in scrape(dcgm)
    assert agent.stop() == 0
