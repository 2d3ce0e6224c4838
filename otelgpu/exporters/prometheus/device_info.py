"""Static device facts: on one info series per device, not on every series.

A GPU's (or MIG instance's) serial number, VBIOS, driver version, minor number, vendor and the
like never change while it reports, and no query filters a utilization or a temperature by
them. Repeated on each of a GPU's ~80 series they were most of the bytes of a line; they are
on one series per device instead, Prometheus' `_info` convention:

    hw_gpu_info{hw_id="GPU-...",hw_model="...",...,hw_serial_number="...",hw_vendor="NVIDIA"} 1

and a query that wants one joins it on the device id (`hw_id`; in dcgm naming dcgm-exporter's
`UUID` and `GPU_I_ID`, which tell a MIG instance from its GPU):

    hw_power_watts * on (hw_id) group_left (hw_serial_number) hw_gpu_info

The info series carries the device's identity labels (`DEVICE`: the ones every series of the
device has) and its facts (`FACTS`), never a holder's or a business label, so a pod moving onto
the GPU does not touch it. It is written by the device's own resource (a resource with `hw.id`
that is neither a process on the device nor a holder's allocation series), under the device's
identity, so it comes, goes and expires with the device's other series.
"""

from __future__ import annotations

from otelgpu.exporters.prometheus.series import FamilyType
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Attributes

# The family (before `namespace`), its type and help text.
INFO_NAME = "hw_gpu_info"
INFO_TYPE: FamilyType = "gauge"
INFO_HELP = (
    "Static facts of a GPU or MIG instance (serial, VBIOS, driver, minor number, vendor), "
    "value 1: join them onto a series with * on (hw_id) group_left (...) hw_gpu_info "
    "(naming dcgm: on (UUID, GPU_I_ID))"
)
INFO_VALUE = "1\n"

# Resource attributes that identify a device: on every series of it and on its info series.
DEVICE: frozenset[str] = frozenset(
    {
        semconv.HW_ID,
        semconv.HW_NAME,
        semconv.HW_MODEL,
        semconv.GPU_INDEX,
        semconv.GPU_PCI_BUS_ID,
        semconv.HOST_NAME,
        semconv.HW_PARENT,
        semconv.MIG_PROFILE,
        semconv.MIG_GPU_INSTANCE_ID,
    }
)
# Static facts: on the info series only (`naming: dcgm` also keeps the driver version on every
# series, as dcgm-exporter's default DCGM_FI_DRIVER_VERSION label field does).
FACTS: frozenset[str] = frozenset(
    {
        semconv.HW_TYPE,
        semconv.HW_VENDOR,
        semconv.HW_DRIVER_VERSION,
        semconv.HW_SERIAL_NUMBER,
        semconv.HW_FIRMWARE_VERSION,
        semconv.GPU_MINOR,
        semconv.MIG_COMPUTE_INSTANCE_ID,
        semconv.MIG_PLACEMENT_START,
        semconv.SIMULATED,
    }
)
ON_INFO: frozenset[str] = DEVICE | FACTS


def writes_info(resource: Attributes, allocation: bool) -> bool:
    """Whether a resource is the device itself (not a process on it, not a holder's
    `allocation` series): the one that writes the device's info series."""
    return semconv.HW_ID in resource and semconv.PROCESS_PID not in resource and not allocation
