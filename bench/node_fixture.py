"""A simulated GPU node shared by the P2 and P3 benchmarks.

`Node` describes it: N simulated GPUs (MIG instances on the first few), processes on each
device, and P pods of which the first ones hold the GPUs (whole GPUs possibly time-sliced
between several pods through `::<n>` replica IDs, one pod per MIG instance) and the rest
hold nothing, as on a busy node. From one description it derives everything each peer
needs, consistent with each other:

- the nvml receiver's `simulated:` block, with explicit UUIDs and process pids;
- a `/proc` tree whose `<pid>/cgroup` files name each process's container (CRI-style);
- the kubelet's pod-resources answer (for the in-memory fake and for the gRPC test kubelet);
- the runtime records of every pod (sandbox with pod labels, `main` container with env), for
  the in-memory FakeRuntime and for a real containerd.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otelgpu.receivers.nvml.processes import PROCESS_METRICS
from tests.peers import cri_records
from tests.unit.processors.container_env.fake_runtime import FakeRuntime

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE = "nvidia.com/mig-2g.20gb"
MIG_PROFILE = "2g.20gb"
ENV_INCLUDE = ("TEAM", "PROJECT")
POD_LABEL_INCLUDE = ("app.kubernetes.io/name",)
_PID_BASE = 200_000


def gpu_uuid(i: int) -> str:
    return f"GPU-b3c40000-0000-4000-8000-{i:012x}"


def mig_uuid(i: int, slot: int) -> str:
    return f"MIG-b3c40000-{i:04x}-4000-8000-{slot:012x}"


@dataclass(frozen=True)
class Holder:
    """One pod: its container `main` and the device IDs it was given (none for most pods)."""

    namespace: str
    pod: str
    index: int
    device_ids: tuple[str, ...]
    resource: str

    @property
    def cri_pod(self) -> cri_records.Pod:
        return cri_records.Pod(self.namespace, self.pod, uid=f"uid-{self.index}")

    @property
    def container_id(self) -> str:
        return self.cri_pod.container_id("main")

    def env(self) -> dict[str, str]:
        """Included keys, plus the usual noise and a secret that must never leave."""
        return {
            "TEAM": f"team-{self.index % 5}",
            "PROJECT": f"project-{self.index % 7}",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/root",
            "CUDA_VERSION": "12.4.1",
            "DB_PASSWORD": "canary-never-exported",
        }

    def pod_labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": f"trainer-{self.index % 9}", "pod-template-hash": "x"}


@dataclass(frozen=True)
class Node:
    """The node: `sharers` pods share each whole GPU; `procs` processes run per device
    (per whole GPU, and on the first MIG instance of a MIG GPU)."""

    gpus: int = 8
    mig_gpus: int = 2
    mig_per_gpu: int = 3
    procs: int = 2
    pods: int = 500
    sharers: int = 1

    def holders(self) -> list[Holder]:
        """The GPU-holding pods, in pod order (pod-0, pod-1, ...)."""
        allocations: list[tuple[tuple[str, ...], str]] = []
        for i in range(self.mig_gpus):
            for slot in range(self.mig_per_gpu):
                allocations.append(((mig_uuid(i, slot),), MIG_RESOURCE))
        for i in range(self.mig_gpus, self.gpus):
            for r in range(self.sharers):
                device = gpu_uuid(i) if self.sharers == 1 else f"{gpu_uuid(i)}::{r}"
                allocations.append(((device,), GPU_RESOURCE))
        return [
            Holder(f"ns-{p % 20}", f"pod-{p}", p, ids, resource)
            for p, (ids, resource) in enumerate(allocations)
        ]

    def all_pods(self) -> list[Holder]:
        """Every pod on the node: the holders first, then pods holding no GPU."""
        holders = self.holders()
        idle = range(len(holders), max(self.pods, len(holders)))
        return holders + [Holder(f"ns-{p % 20}", f"pod-{p}", p, (), "") for p in idle]

    def processes(self) -> dict[int, list[tuple[int, Holder]]]:
        """GPU index → its processes as (pid, owning holder): the device's holders in turn."""
        by_device: dict[str, list[Holder]] = {}
        for holder in self.holders():
            base = holder.device_ids[0].split("::")[0]
            by_device.setdefault(base, []).append(holder)
        out: dict[int, list[tuple[int, Holder]]] = {}
        for i in range(self.gpus):
            device = mig_uuid(i, 0) if i < self.mig_gpus else gpu_uuid(i)
            owners = by_device[device]
            out[i] = [
                (_PID_BASE + i * 1000 + k, owners[k % len(owners)]) for k in range(self.procs)
            ]
        return out

    # --- the nvml receiver ----------------------------------------------------------------

    def simulated(self) -> dict[str, Any]:
        """The nvml receiver's `simulated:` block."""
        procs = self.processes()
        gpus = []
        for i in range(self.gpus):
            mig = [
                {"uuid": mig_uuid(i, slot), "profile": MIG_PROFILE}
                for slot in range(self.mig_per_gpu if i < self.mig_gpus else 0)
            ]
            processes = [
                {"pid": pid, "used_memory": (1 + k) << 30} for k, (pid, _) in enumerate(procs[i])
            ]
            gpus.append({"uuid": gpu_uuid(i), "mig": mig, "processes": processes})
        return {"gpus": gpus}

    def receiver_config(
        self, host_proc: Path, interval: str = "1s", process_metrics: bool = True
    ) -> dict[str, Any]:
        """`receivers::nvml` for this node (processes mapped through `host_proc`). The bigger
        nodes get their points from their processes, so the per-process metrics (opt-in in
        the receiver) are on unless `process_metrics` is False (the default metric set)."""
        config: dict[str, Any] = {
            "collection_interval": interval,
            "processes": True,
            "host_proc": str(host_proc),
            "backend": "simulated",
            "simulated": self.simulated(),
        }
        if process_metrics:
            config["metrics"] = {name: {"enabled": True} for name in sorted(PROCESS_METRICS)}
        return config

    def write_host_proc(self, root: Path) -> Path:
        """`<root>/<pid>/cgroup` for every simulated process, as containerd's CRI writes it."""
        for processes in self.processes().values():
            for pid, holder in processes:
                directory = root / str(pid)
                directory.mkdir(parents=True, exist_ok=True)
                slice_ = f"kubepods-pod{holder.cri_pod.uid.replace('-', '_')}.slice"
                path = f"/kubepods.slice/{slice_}/cri-containerd-{holder.container_id}.scope"
                (directory / "cgroup").write_text(f"0::{path}\n")
        return root

    # --- the kubelet ----------------------------------------------------------------------

    def allocatable(self) -> dict[str, list[str]]:
        """`GetAllocatableResources`: every device ID the device plugins advertise."""
        out: dict[str, list[str]] = {}
        for holder in self.holders():
            out.setdefault(holder.resource, []).extend(holder.device_ids)
        return out

    def pod_devices(self) -> Iterator[tuple[str, str, dict[str, list[str]]]]:
        """(namespace, pod, {resource: device IDs} of container `main`) for every pod; each
        pod also has a `sidecar` container holding nothing."""
        for p in self.all_pods():
            devices = {p.resource: list(p.device_ids)} if p.device_ids else {}
            yield p.namespace, p.pod, devices

    # --- the container runtime ------------------------------------------------------------

    def fake_runtime(self) -> FakeRuntime:
        """An in-memory runtime holding every pod's sandbox and `main` container."""
        runtime = FakeRuntime("containerd")
        for holder in self.all_pods():
            sandbox = holder.cri_pod.sandbox_id
            runtime.sandbox(sandbox, holder.namespace, holder.pod, labels=holder.pod_labels())
            runtime.workload(
                holder.container_id,
                holder.namespace,
                holder.pod,
                "main",
                env=holder.env(),
                labels={"io.kubernetes.pod.uid": holder.cri_pod.uid},
                sandbox_id=sandbox,
            )
        return runtime

    def write_cri_records(self, socket: Path) -> int:
        """Every pod's sandbox and `main` container into a real containerd, as its CRI
        plugin stores them; returns how many records were written."""
        pods = self.all_pods()
        for holder in pods:
            pod = cri_records.Pod(
                holder.namespace, holder.pod, uid=holder.cri_pod.uid, labels=holder.pod_labels()
            )
            # Running, as a kubelet leaves them (only live containers label), in one shared
            # runc shim: a shim per pod would cost ~13 MiB each.
            cri_records.create_sandbox(socket, pod, shim_group="bench")
            cri_records.create_container(socket, pod, "main", env=holder.env(), shim_group="bench")
        return 2 * len(pods)

    def container_env_options(self) -> dict[str, Any]:
        """The include lists both benchmarks configure on `container_env`."""
        return {
            "env": {"include": list(ENV_INCLUDE)},
            "pod_labels": {"include": list(POD_LABEL_INCLUDE)},
        }
