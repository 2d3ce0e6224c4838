"""The readings dcgm-exporter users alert on (fields_parity.py, parity_reads.py): clock events, violation time, NVLink
errors and state, ECC lifetime counts, retired pages, row-remap pending, PCIe link and vGPU
licence, through the simulated backend, the real backend over the fake pynvml, and the
Prometheus exporter's dcgm naming."""

from __future__ import annotations

from collections.abc import Iterable

import pynvml as real
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Batch, Metric, ResourceMetrics
from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.dcgm_fields import dcgm_name
from otelgpu.receivers.nvml.dcgm_names import NAMING
from otelgpu.receivers.nvml.fields_parity import PARITY_ROWS
from otelgpu.receivers.nvml.metrics import BY_NAME, CATALOG
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.real_nvml import RealNvml
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.sources import FIELD_IDS
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id, metrics, sim, value
from tests.unit.receivers.nvml.test_real_backend import (  # the fake pynvml and its fixtures
    GPU0,
    GPU1,
    FakePynvml,
    client,
    fake,
    pointer,
)

__all__ = ["client", "fake"]  # pytest fixtures, imported for use here

ALL_ON = {spec.name: {"enabled": True} for spec in CATALOG}
H100_PCIE = "NVIDIA H100 PCIe"


# The parity metrics that are opt-in (all of them but the vGPU licence status).
PARITY_OPT_IN = frozenset(row[0] for row in PARITY_ROWS) - {"nvidia.gpu.vgpu.license.status"}


def on(names: Iterable[str]) -> dict[str, dict[str, bool]]:
    """`metrics:` switching `names` on."""
    return {name: {"enabled": True} for name in names}


def points(rm: ResourceMetrics, name: str) -> dict[tuple[object, ...], float]:
    """A metric's points keyed by their own attribute values (in attribute order; the hw.id and
    hw.type every point carries are left out)."""
    metric: Metric = metrics(rm)[name]
    own = {k for k in ("hw.id", "hw.type")}
    return {
        tuple(v for k, v in p.attributes.items() if k not in own): p.value for p in metric.points
    }


# --- simulated backend --------------------------------------------------------------------


async def test_violation_time_is_seconds_per_policy(
    make_receiver: MakeReceiver, clock: FakeClock
) -> None:
    receiver = make_receiver(metric_set="all", simulated={"gpus": 2})
    await receiver.scrape()
    clock.now += 100.0
    gpus = list(by_id(await receiver.scrape()).values())
    for index, gpu in enumerate(gpus):
        got = points(gpu, "nvidia.gpu.clock.violation.time")
        # The simulation counts 5e7 ns per second per (index + 1) of power capping.
        assert got[("power",)] == pytest.approx(100.0 * 0.05 * (index + 1))
        assert got[("low_utilization",)] == pytest.approx(100.0 * 0.2)
        assert set(got) == {
            ("power",), ("thermal",), ("sync_boost",), ("board_limit",),
            ("low_utilization",), ("reliability",),
        }  # fmt: skip
    spec = BY_NAME["nvidia.gpu.clock.violation.time"]
    assert (spec.unit, spec.monotonic) == ("s", True)


async def test_clock_events_one_series_per_reason_and_the_bitmask(
    make_receiver: MakeReceiver,
) -> None:
    receiver = make_receiver(metric_set="all")
    sim(receiver).set_reading(0, "clock_event_reasons", 0x4 | 0x40)  # power cap + HW thermal
    (gpu,) = by_id(await receiver.scrape()).values()
    active = points(gpu, "nvidia.gpu.clock.event.active")
    assert len(active) == 9
    assert {k[0] for k, v in active.items() if v == 1} == {"power_cap", "hw_thermal"}
    assert active[("gpu_idle",)] == 0
    assert value(gpu, "nvidia.gpu.clock.event.reasons") == 0x44


async def test_clock_events_are_off_by_default(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver()
    (gpu,) = by_id(await receiver.scrape()).values()
    assert "nvidia.gpu.clock.event.active" not in metrics(gpu)
    assert "nvidia.gpu.clock.event.reasons" not in metrics(gpu)


async def test_nvlink_totals_state_and_per_link_errors(
    make_receiver: MakeReceiver, clock: FakeClock
) -> None:
    receiver = make_receiver(metric_set="all")
    await receiver.scrape()
    clock.now += 900.0
    (gpu,) = by_id(await receiver.scrape()).values()
    totals = points(gpu, "nvidia.gpu.nvlink.errors")
    assert totals == {("crc_flit",): 1, ("crc_data",): 0, ("replay",): 3, ("recovery",): 0}
    state = points(gpu, "nvidia.gpu.nvlink.state")
    assert state == {(link,): 1 for link in range(18)}  # an H100 SXM: 18 links, all up
    per_link = points(gpu, "nvidia.gpu.nvlink.link.errors")
    assert len(per_link) == 18 * 4
    assert per_link[(0, "replay")] == 3  # GPU 0's replays are all on link 0
    assert per_link[(1, "replay")] == 0


async def test_gpu_without_nvlink_is_asked_once(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        simulated={"gpus": [{"model": H100_PCIE}]},
        metrics={"nvidia.gpu.nvlink.link.errors": {"enabled": True}},
    )
    await receiver.scrape()
    asked = sim(receiver).calls["nvmlDeviceGetNvLinkState"]
    (gpu,) = by_id(await receiver.scrape()).values()
    assert "nvidia.gpu.nvlink.state" not in metrics(gpu)
    assert "nvidia.gpu.nvlink.link.errors" not in metrics(gpu)
    # The first cycle probes every link number (twice: state, then errors find the same
    # answer already remembered); after that, nothing.
    assert asked == 18
    assert sim(receiver).calls["nvmlDeviceGetNvLinkState"] == asked


async def test_ecc_lifetime_retired_pages_and_pending_flags(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(metric_set="all", simulated={"gpus": 2})
    sim(receiver).set_reading(1, "NVML_FI_DEV_RETIRED_PENDING", 1)
    sim(receiver).set_reading(1, "NVML_FI_DEV_REMAPPED_PENDING", 1)
    first, second = by_id(await receiver.scrape()).values()
    assert points(second, "nvidia.gpu.ecc.aggregate.errors") == {
        ("corrected",): 3,
        ("uncorrected",): 0,
    }
    assert points(second, "nvidia.gpu.memory.retired_pages") == {
        ("corrected",): 1,
        ("uncorrected",): 0,
    }
    assert value(first, "nvidia.gpu.memory.retired_pages.pending") == 0
    assert value(second, "nvidia.gpu.memory.retired_pages.pending") == 1
    assert value(second, "nvidia.gpu.memory.row_remap.pending") == 1


async def test_pcie_link_current_and_max(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(metric_set="all")
    sim(receiver).set_reading(0, "pcie_width", 8)
    (gpu,) = by_id(await receiver.scrape()).values()
    assert points(gpu, "nvidia.gpu.pcie.link.width") == {("current",): 8, ("max",): 16}
    assert points(gpu, "nvidia.gpu.pcie.link.generation") == {("current",): 5, ("max",): 5}


async def test_vgpu_license_not_supported_on_bare_metal_is_remembered(
    make_receiver: MakeReceiver, telemetry: SelfTelemetry
) -> None:
    receiver = make_receiver()
    await receiver.scrape()
    (gpu,) = by_id(await receiver.scrape()).values()
    assert "nvidia.gpu.vgpu.license.status" not in metrics(gpu)
    assert sim(receiver).calls["nvmlDeviceGetGridLicensableFeatures"] == 1
    errors = [m for m in telemetry.collect().metrics if m.name == "otelgpu_nvml_read_errors_total"]
    assert errors == []  # refused for good, not an error


async def test_vgpu_license_in_a_guest(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(simulated={"gpus": 2})
    sim(receiver).set_reading(0, "vgpu_licensed", 1)
    sim(receiver).set_reading(1, "vgpu_licensed", 0)
    first, second = by_id(await receiver.scrape()).values()
    assert value(first, "nvidia.gpu.vgpu.license.status") == 1
    assert value(second, "nvidia.gpu.vgpu.license.status") == 0


async def test_mig_instances_do_not_repeat_whole_gpu_readings(make_receiver: MakeReceiver) -> None:
    receiver = make_receiver(
        metric_set="all", simulated={"gpus": [{"uuid": "GPU-a", "mig": [{"uuid": "MIG-a1"}]}]}
    )
    found = by_id(await receiver.scrape())
    assert "nvidia.gpu.nvlink.state" in metrics(found["GPU-a"])
    for name in ("nvidia.gpu.nvlink.state", "nvidia.gpu.clock.event.active"):
        assert name not in metrics(found["MIG-a1"])
    # A MIG instance's hw.status says only whether it answers; the reasons stay on its GPU.
    mig_status = metrics(found["MIG-a1"])["hw.status"].points
    assert {p.attributes["hw.state"]: p.value for p in mig_status} == {
        "ok": 1,
        "degraded": 0,
        "failed": 0,
    }
    assert all(p.attributes["nvidia.gpu.health.reason"] == "" for p in mig_status)


# --- dcgm naming --------------------------------------------------------------------------


def dcgm_text(batch: Batch) -> dict[str, float]:
    store = SeriesStore()
    Translator("dcgm", {}, names=NAMING).ingest(store, batch, now=1.0)
    text, _ = render_text(store.families.values())
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, rest = line.split("{", 1)
            labels, number = rest.rsplit("} ", 1)
            values[name] = float(number)
            assert "error_type" not in labels and "violation_policy" not in labels, line
    return values


async def test_dcgm_names_and_units(make_receiver: MakeReceiver, clock: FakeClock) -> None:
    receiver = make_receiver(metrics=on(PARITY_OPT_IN - {"nvidia.gpu.nvlink.link.errors"}))
    sim(receiver).set_reading(0, "clock_event_reasons", 0x4)
    sim(receiver).set_reading(0, "NVML_FI_DEV_REMAPPED_PENDING", 1)
    await receiver.scrape()
    clock.now += 300.0
    served = dcgm_text(await receiver.scrape())
    assert served["DCGM_FI_DEV_POWER_VIOLATION"] == pytest.approx(300 * 5e7)  # ns, as dcgm
    assert served["DCGM_FI_DEV_LOW_UTIL_VIOLATION"] == pytest.approx(300 * 2e8)
    assert served["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] == 1
    assert served["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"] == 4
    assert served["DCGM_FI_DEV_ROW_REMAP_PENDING"] == 1
    assert served["DCGM_FI_DEV_RETIRED_SBE"] == 0
    assert served["DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"] == 6
    for name in (
        "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_RETIRED_PENDING",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    ):  # fmt: skip
        assert name in served, name


def test_dcgm_names_of_the_split_parity_metrics() -> None:
    assert dcgm_name("nvidia.gpu.clock.violation.time", {VIOLATION: "thermal"}) == (
        "DCGM_FI_DEV_THERMAL_VIOLATION"
    )
    assert dcgm_name("nvidia.gpu.nvlink.errors", {"error.type": "crc_data"}) == (
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"
    )
    assert dcgm_name("nvidia.gpu.memory.retired_pages", {"error.type": "uncorrected"}) == (
        "DCGM_FI_DEV_RETIRED_DBE"
    )


VIOLATION = "nvidia.gpu.clock.violation.policy"


# --- real backend over the fake pynvml ------------------------------------------------------


def test_real_clock_events_pcie_and_nvlink_calls(fake: FakePynvml, client: RealNvml) -> None:
    fake.devices[GPU0].clock_reasons = 0x88
    fake.devices[GPU0].nvlinks = [True, False]
    fake.devices[GPU0].pcie = (3, 5, 8, 16)
    h = pointer(GPU0)
    assert client.clock_event_reasons(h) == 0x88
    assert client.nvlink_state(h, 0) is True
    assert client.nvlink_state(h, 1) is False
    assert client.nvlink_error_counter(h, 1, real.NVML_NVLINK_ERROR_DL_REPLAY) == 100
    assert client.pcie_link(h) == (3, 5, 8, 16)
    with pytest.raises(NvmlError) as caught:
        client.nvlink_state(h, 2)
    assert caught.value.code == real.NVML_ERROR_INVALID_ARGUMENT
    assert fake.called("nvmlDeviceGetNvLinkErrorCounter") == [(GPU0, 1, 0)]
    assert fake.called("nvmlDeviceGetCurrentClocksEventReasons") == [(GPU0,)]


def test_real_vgpu_license(fake: FakePynvml, client: RealNvml) -> None:
    h = pointer(GPU0)
    with pytest.raises(NvmlError) as caught:  # bare metal: no licensing at all
        client.vgpu_licensed(h)
    assert caught.value.code == nvml.ERROR_NOT_SUPPORTED
    fake.devices[GPU0].grid = [(1, 0)]  # enabled, not licensed
    assert client.vgpu_licensed(h) is False
    fake.devices[GPU0].grid = [(0, 1), (1, 1)]
    assert client.vgpu_licensed(h) is True
    fake.devices[GPU0].grid = [(0, 1)]  # licensed but not enabled: does not count
    assert client.vgpu_licensed(h) is False


@pytest.mark.parametrize(
    ("function", "call"),
    [
        ("nvmlDeviceGetCurrentClocksEventReasons", lambda c, h: c.clock_event_reasons(h)),
        ("nvmlDeviceGetNvLinkState", lambda c, h: c.nvlink_state(h, 0)),
        ("nvmlDeviceGetNvLinkErrorCounter", lambda c, h: c.nvlink_error_counter(h, 0, 0)),
        ("nvmlDeviceGetCurrPcieLinkGeneration", lambda c, h: c.pcie_link(h)),
        ("nvmlDeviceGetMaxPcieLinkWidth", lambda c, h: c.pcie_link(h)),
        ("nvmlDeviceGetGridLicensableFeatures_v4", lambda c, h: c.vgpu_licensed(h)),
    ],
)
def test_new_calls_translate_nvml_errors(
    fake: FakePynvml, client: RealNvml, function: str, call: object
) -> None:
    fake.fail[function] = real.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlError) as caught:
        call(client, pointer(GPU0))  # type: ignore[operator]
    assert caught.value.code == nvml.ERROR_GPU_IS_LOST


async def test_receiver_over_real_backend_reads_links_it_has(
    fake: FakePynvml, telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    del fake.devices[GPU1]
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    fake.devices[GPU0].nvlinks = [True, True, False]
    fake.devices[GPU0].clock_reasons = 0x20  # SW thermal slowdown
    fake.field_answers = {
        74: (real.NVML_SUCCESS, real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 2_500_000_000),
    }
    config = NvmlReceiverConfig.model_validate(
        {"backend": "nvml", "metrics": on(PARITY_OPT_IN - {"nvidia.gpu.nvlink.link.errors"})}
    )
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    try:
        await receiver.scrape()
        gpu = by_id(await receiver.scrape())["GPU-aaaa"]
    finally:
        await receiver.shutdown()
    assert points(gpu, "nvidia.gpu.nvlink.state") == {(0,): 1, (1,): 1, (2,): 0}
    assert points(gpu, "nvidia.gpu.clock.violation.time")[("power",)] == 2.5
    assert points(gpu, "nvidia.gpu.clock.event.active")[("sw_thermal",)] == 1
    # Link 3 answered INVALID_ARGUMENT once and was not asked again; 0..2 every cycle.
    asked = [args[1] for args in fake.called("nvmlDeviceGetNvLinkState")]
    assert asked.count(3) == 1 and asked.count(0) == 2
    assert max(asked) == 17
    assert points(gpu, "nvidia.gpu.up") == {("degraded", "clock_sw_thermal,nvlink_down"): 1}
    # The bare-metal licence call was refused once, for good.
    assert len(fake.called("nvmlDeviceGetGridLicensableFeatures_v4")) == 1
    errors = [m for m in telemetry.collect().metrics if m.name == "otelgpu_nvml_read_errors_total"]
    assert errors == []


async def test_an_nvlink_direction_failing_for_one_cycle_leaves_no_half_total_that_cycle(
    fake: FakePynvml, telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> None:
    del fake.devices[GPU1]
    fake.devices[GPU0].mig_mode = real.NVML_DEVICE_MIG_DISABLE
    ull = real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    tx, rx = (
        FIELD_IDS["NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX"],
        FIELD_IDS["NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX"],
    )
    split = "nvidia.gpu.nvlink.io.by_direction"
    config = NvmlReceiverConfig.model_validate({"backend": "nvml", "metrics": on([split])})
    receiver = NvmlReceiver(
        make_settings("nvml", Kind.RECEIVER, telemetry), config, sink, clock=clock
    )
    try:
        fake.field_answers = {
            tx: (real.NVML_SUCCESS, ull, 10),
            rx: (real.NVML_ERROR_UNKNOWN, ull, 0),
        }
        gpu = by_id(await receiver.scrape())["GPU-aaaa"]
        assert "nvidia.gpu.nvlink.io" not in metrics(gpu)  # half a counter reads as a reset
        assert points(gpu, split) == {("transmit",): 10 * 1024}
        fake.field_answers = {tx: (real.NVML_SUCCESS, ull, 12), rx: (real.NVML_SUCCESS, ull, 9)}
        gpu = by_id(await receiver.scrape())["GPU-aaaa"]
        assert points(gpu, "nvidia.gpu.nvlink.io") == {(): (12 + 9) * 1024}  # asked again
    finally:
        await receiver.shutdown()
