"""R10 as a watcher: every /metrics body the agent serves, checked for the series-identity rules.

A task scrapes both endpoints (otel and dcgm naming) every `INTERVAL` for the whole module,
from the moment the agent is launched, through start, reload, runtime kill and restart,
kubelet slowness and pod churn. For every body it checks:

- one series per identity: per metric family, device (its own UUID), process and the
  attributes the receiver produced (error type, XID code, task), at most one line. A ghost (an
  old label set beside the new) or a per-holder copy of a shared GPU breaks this;
- allocation shares: the `nvidia_gpu_allocation_ratio` series of a device add up to 1, so sums
  over pods or teams equal the device's total;
- no borrowed labels: each (device, pod, team) a series carries is one the test declared true
  at some point (`allow`); a dead pod's labels on another device, or one pod's env on another
  pod's series, is a violation.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from otelgpu.exporters.prometheus.naming import sanitize_label
from otelgpu.receivers.nvml.fields_parity import HEALTH_REASON
from otelgpu.receivers.nvml.metrics import CATALOG

INTERVAL = 0.25
ALLOCATION = "nvidia_gpu_allocation_ratio"
INFO = "hw_gpu_info"
# Labels the receiver produces on points (every catalog point attribute, plus the XID code and
# dcgm's err_code); every other label is a property of the series. A GPU's health summary
# (nvidia.gpu.up: one series, its hw.state the current state; hw.status when on: one series per
# hw.state) keeps its series whatever the reason, so the reason is not one of them.
POINT_LABELS = tuple(
    sorted(
        {sanitize_label(key) for spec in CATALOG for key in spec.attributes if key != HEALTH_REASON}
        | {"nvidia_xid_code", "err_code"}
    )
)
POD = {"otel": "k8s_pod_name", "dcgm": "pod"}
TEAM = {"otel": "container_env_TEAM", "dcgm": "env_TEAM"}


@dataclass
class SeriesWatch:
    """Checks every body of both endpoints in the background; `violations` says what broke."""

    ports: dict[str, int]  # naming → port
    # dcgm naming names a MIG instance by its GPU's UUID and GPU_I_ID: (UUID, GPU_I_ID) → its UUID
    instances: dict[tuple[str, str], str] = field(default_factory=dict)
    allowed: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    phase: str = "start"
    scrapes: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    violations: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def allow(self, device: str, pod: str | None, team: str | None) -> None:
        """Declares that `device` may carry this pod and team (None: the label is absent). The
        pod without the team is allowed too: a new container's env can lag its pod by one
        refresh, which is a missing label, not a wrong one."""
        self.allowed.add((device, pod, team))
        self.allowed.add((device, pod, None))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="series-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                for naming, port in self.ports.items():
                    try:
                        url = f"http://127.0.0.1:{port}/metrics"
                        async with session.get(url) as response:
                            body = await response.text() if response.status == 200 else None
                    except aiohttp.ClientError:
                        body = None  # not listening yet, or restarting on a reload
                    if body is None:
                        self.refused += 1
                        continue
                    self.scrapes[self.phase] += 1
                    for problem in self.check(naming, body):
                        if len(self.violations) < 200:
                            self.violations.append(f"[{self.phase}] {naming}: {problem}")
                await asyncio.sleep(INTERVAL)

    def check(self, naming: str, body: str) -> list[str]:
        """What is wrong with one body ([] when nothing is)."""
        problems: list[str] = []
        seen: Counter[tuple[object, ...]] = Counter()
        shares: defaultdict[str, float] = defaultdict(float)
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                labels = sample.labels
                device = labels.get("hw_id") or labels.get("UUID")
                if "GPU_I_ID" in labels and device:
                    device = self.instances.get((device, labels["GPU_I_ID"]), device)
                if not device or sample.name.startswith("otelgpu_"):
                    continue
                if sample.name == INFO:  # a device's static facts: no holder's labels
                    if labels.get(POD[naming]) or labels.get(TEAM[naming]):
                        problems.append(f"{INFO} on {device} carries holder labels")
                    continue
                if sample.name == ALLOCATION:
                    shares[device] += sample.value
                else:
                    points = tuple(labels.get(k) for k in POINT_LABELS)
                    seen[(sample.name, device, labels.get("process_pid"), points)] += 1
                if "process_pid" in labels:
                    continue  # a process is labelled by its own container, checked elsewhere
                who = (device, labels.get(POD[naming]), labels.get(TEAM[naming]))
                if who not in self.allowed:
                    problems.append(f"{sample.name} on {device} says pod={who[1]} team={who[2]}")
        problems += [f"{n} series for {key}" for key, n in seen.items() if n > 1]
        problems += [
            f"allocation shares of {device} add up to {total}"
            for device, total in shares.items()
            if not math.isclose(total, 1.0, abs_tol=1e-6)
        ]
        return problems[:20]
