"""What the processor says about NVIDIA DRA claim devices that label nothing: counted by reason
in `otelgpu_dra_devices_unmapped_total`, and logged as a warning once per change of what is
wrong."""

from __future__ import annotations

from otelgpu.component.component import Settings
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from otelgpu.processors.k8s_attributes.devices import Key
from otelgpu.processors.k8s_attributes.snapshot import DRA, Allocation, Snapshot, describe_forms

DRA_UNMAPPED = "otelgpu_dra_devices_unmapped_total"
DRA_NO_GPU = "no_matching_gpu"  # the name is read, but no GPU/MIG resource of the batch has it
DRA_MIG_ENABLED = "mig_enabled"  # a whole-GPU claim on a GPU held through its MIG instances


class DraReport:
    """Counts and logs the NVIDIA DRA claim devices that labelled nothing."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._id = str(settings.id)
        self._said = ""

    def installed(self, snapshot: Snapshot) -> None:
        """A new answer: says which of its claim devices name no GPU on this node."""
        if snapshot.dra_unmapped:
            self._say(
                "DRA claim devices of gpu.nvidia.com that name no GPU on this node: "
                + describe_forms(snapshot.dra_unmapped)
            )

    def unmapped(self, snapshot: Snapshot, missing: frozenset[Key]) -> None:
        """Counts (once per batch) the NVIDIA DRA claim devices that labelled nothing: those
        whose name reaches no GPU, and those whose GPU is not in this batch (`missing`)."""
        counts = {**snapshot.dra_unmapped, DRA_NO_GPU: len(missing)}
        for reason, n in counts.items():
            if n:
                self._count(n, reason)
        if missing:
            self._say(
                "DRA claim devices with no GPU or MIG instance in the batch (do the nvml "
                "resources carry nvidia.gpu.minor / nvidia.mig.placement_start?): "
                + ", ".join("/".join(key) for key in sorted(missing))
            )

    def whole_claim_on_mig_gpu(self, rm: ResourceMetrics, found: Allocation) -> None:
        """A MIG-enabled GPU is held only through its MIG instances: a whole-GPU DRA claim on
        it labels nothing (counted as `mig_enabled`, logged once per change)."""
        if DRA in found.sources:
            self._count(sum(1 for s in found.sources if s == DRA), DRA_MIG_ENABLED)
            self._say(
                f"a whole-GPU DRA claim names GPU {rm.resource.get(semconv.HW_ID)}, which has "
                "MIG enabled: it is held through its MIG instances, the claim labels nothing"
            )

    def _say(self, message: str) -> None:
        """Logs a warning about unmapped DRA claim devices once per change of the message."""
        if message != self._said:
            self._said = message
            self._settings.logger.warning("%s", message)

    def _count(self, n: int, reason: str) -> None:
        self._settings.telemetry.count(DRA_UNMAPPED, n, processor=self._id, reason=reason)
