"""The HELP text of each dcgm-exporter field, as `naming: dcgm` serves it.

A field is served in dcgm-exporter's unit (%, MiB, MHz, mJ, ns) and without the OTel attribute
that tells the catalog metric's points apart (a split metric is a field per value). The
catalog's description says neither, so each field has its own text here: what it reads, in the
unit it is served in. Written for this agent; dcgm-exporter's CSV texts are not copied.
"""

from __future__ import annotations

from collections.abc import Mapping

from otelgpu.receivers.nvml.fields_parity import NVLINK_TOTALS, VIOLATIONS

_SHARE = "0..1"
_SINCE_LOAD = "since the driver was loaded"
_NVLINK_KINDS: Mapping[str, str] = {
    "crc_flit": "flit CRC",
    "crc_data": "data CRC",
    "replay": "replay",
    "recovery": "recovery",
}

DCGM_HELP: Mapping[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization: time one or more kernels ran, in % (0..100).",
    "DCGM_FI_DEV_ENC_UTIL": "Video encoder utilization, in % (0..100).",
    "DCGM_FI_DEV_DEC_UTIL": "Video decoder utilization, in % (0..100).",
    "DCGM_FI_DEV_MEM_COPY_UTIL": (
        "Memory utilization: time device memory was read or written, in % (0..100)."
    ),
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used, in MiB.",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free, in MiB.",
    "DCGM_FI_DEV_FB_RESERVED": "Framebuffer memory the driver and firmware reserve, in MiB.",
    "DCGM_FI_DEV_FB_TOTAL": "Framebuffer memory size, in MiB.",
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency, in MHz.",
    "DCGM_FI_DEV_MEM_CLOCK": "Memory clock frequency, in MHz.",
    "DCGM_FI_DEV_GPU_TEMP": "GPU core temperature, in degrees Celsius.",
    "DCGM_FI_DEV_MEMORY_TEMP": "Device memory (HBM) temperature, in degrees Celsius.",
    "DCGM_FI_DEV_SHUTDOWN_TEMP": "Temperature at which the GPU shuts down, in degrees Celsius.",
    "DCGM_FI_DEV_SLOWDOWN_TEMP": (
        "Temperature at which the GPU slows its clocks in hardware, in degrees Celsius."
    ),
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP": "The GPU's maximum operating temperature, in degrees Celsius.",
    "DCGM_FI_DEV_GPU_TEMP_LIMIT": (
        "How far the GPU is below its T.Limit, in degrees Celsius (negative past it)."
    ),
    "DCGM_FI_DEV_POWER_USAGE": "Power draw, in W.",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "Power management limit in force, in W.",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": f"Energy used {_SINCE_LOAD}, in mJ.",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": f"PCIe replays (link-level retransmissions) {_SINCE_LOAD}.",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "PCIe data sent, in bytes per second over the interval.",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "PCIe data received, in bytes per second over the interval.",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "NVLink data sent and received over all links, in bytes."
    ),
    "DCGM_FI_DEV_XID_ERRORS": "The code of an XID error the driver reported (err_code).",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": f"Single-bit (corrected) ECC errors {_SINCE_LOAD}.",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": f"Double-bit (uncorrected) ECC errors {_SINCE_LOAD}.",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "Single-bit (corrected) ECC errors over the GPU's life.",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "Double-bit (uncorrected) ECC errors over the GPU's life.",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "Memory rows remapped for correctable errors.",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "Memory rows remapped for uncorrectable errors.",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "1 if a row remapping failed (the GPU needs service).",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "1 while a row remapping waits for a GPU reset.",
    "DCGM_FI_DEV_RETIRED_SBE": "Memory pages retired after repeated single-bit errors.",
    "DCGM_FI_DEV_RETIRED_DBE": "Memory pages retired after a double-bit error.",
    "DCGM_FI_DEV_RETIRED_PENDING": "1 while a page waits to be retired at the next reset.",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "1 while the vGPU guest holds a licence.",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "Why the clocks are held back: NVML's reason bitmask.",
    "DCGM_FI_PROF_SM_ACTIVE": f"SM activity, averaged over the SMs, {_SHARE}.",
    "DCGM_FI_PROF_SM_OCCUPANCY": f"Resident warps as a share of the SMs' maximum, {_SHARE}.",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"Time the graphics or compute engine was busy, {_SHARE}.",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f"Time the tensor pipes were busy, {_SHARE}.",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": f"Time the FP64 pipes were busy, {_SHARE}.",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": f"Time the FP32 pipes were busy, {_SHARE}.",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": f"Time the FP16 pipes were busy, {_SHARE}.",
    "DCGM_FI_PROF_DRAM_ACTIVE": f"Device memory bandwidth used, share of its peak, {_SHARE}.",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "NVLink data sent, all links, in bytes per second.",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "NVLink data received, all links, in bytes per second.",
    **{
        dcgm: f"Time the clocks were held low by the {policy.replace('_', ' ')} policy, in ns."
        for policy, dcgm in VIOLATIONS.values()
    },
    **{
        dcgm: f"NVLink {_NVLINK_KINDS[kind]} errors, all links, {_SINCE_LOAD}."
        for kind, dcgm in NVLINK_TOTALS.values()
    },
}
