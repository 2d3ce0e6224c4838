"""Random histories of a GPU node, run through the whole labelling pipeline and model-checked.

Each rule changes the node (pods come, go, come back under the same name, move; containers
hold 0, 1 or several GPUs, whole, time-sliced, MIG or by DRA claim, exclusive or shared;
processes start and end; a GPU is lost; the kubelet and the runtime fail and come back; the
kubelet lags, listing a pod recreated under its name on its old devices; the agent reloads), then lets up to one refresh interval pass on the fake clock and collects one
cycle. After every step every /metrics body (otel and dcgm naming) and the OTLP request must
satisfy the invariants in `invariants.py` against the node model.

Bounded here to run in about a minute with a fixed derandomized search and no example
database, so CI is deterministic. `OTELGPU_PROPERTY_PROFILE=soak` (what `scripts/property_soak`
sets) searches randomly under `--hypothesis-seed`, `OTELGPU_PROPERTY_EXAMPLES` examples of
`OTELGPU_PROPERTY_STEPS` steps. `OTELGPU_PROPERTY_IGNORE=labels,gone` leaves named invariants
(`invariants.CHECKS`, and `downstream`) unchecked and `OTELGPU_PROPERTY_CATCH_UP=2` gives labels
two refresh intervals instead of one to appear (both to look past a known failure for the next one; nothing sets them by default).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.fakes import FakeClock
from tests.unit.property.harness import REFRESH, Output, Pipeline, quiet_logs
from tests.unit.property.invariants import (
    DCGM,
    OTEL,
    Downstream,
    Windows,
    check_all,
    read_otlp,
    read_prometheus,
)
from tests.unit.property.node_model import (
    APPS,
    DEVICES,
    FORMS,
    GPU_COUNT,
    PROCESS_DEVICES,
    TEAMS,
    Container,
    Grant,
    NodeModel,
    Pod,
    Process,
)

POD_NAMES = ("p0", "p1", "p2", "p3")
CONTAINER_NAMES = ("main", "side", "aux")
XID_CODES = (13, 48, 79, 94)
# Steps advance the clock by one of these fractions of the refresh interval before collecting.
STEP = st.sampled_from([0.0, 0.5, 1.0])
# How long (in refresh intervals) the node must hold still before every label must be there.
CATCH_UP = float(os.environ.get("OTELGPU_PROPERTY_CATCH_UP", "1")) * REFRESH
IGNORE = tuple(x for x in os.environ.get("OTELGPU_PROPERTY_IGNORE", "").split(",") if x)

# (device key, preferred form) per grant; a container holds 0 to 3 devices.
GRANTS = st.lists(
    st.tuples(st.sampled_from([d.key for d in DEVICES]), st.sampled_from(FORMS)),
    max_size=3,
    unique_by=lambda g: g[0],
)
CONTAINERS = st.lists(st.tuples(st.sampled_from(TEAMS), GRANTS), min_size=1, max_size=3)
# A pod instance as the create and recreate rules draw it.
POD = {
    "name": st.sampled_from(POD_NAMES),
    "containers": CONTAINERS,
    "app": st.sampled_from(APPS),
    "late": st.booleans(),
    "dt": STEP,
}


class NodeHistories(RuleBasedStateMachine):
    """The node model, the real pipeline beside it, and the invariants after each step."""

    def __init__(self) -> None:
        super().__init__()
        quiet_logs()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.model = NodeModel()
        self.pipeline = Pipeline(self.model, self.clock)
        self.output: Output | None = None
        self.downstream = Downstream()
        self.named: set[str] = set()  # every pod name ever created
        self._run(self.pipeline.start())
        self.model.record(self.clock.now)
        self._collect(0.0)

    def teardown(self) -> None:
        try:
            self._run(self.pipeline.shutdown())
        finally:
            self.loop.close()

    # --- driving -------------------------------------------------------------------------

    def _run(self, coroutine: object) -> object:
        return self.loop.run_until_complete(coroutine)  # type: ignore[arg-type]

    def _collect(self, fraction: float) -> None:
        """Records the truth, shows it through every stand-in at once (the kubelet, the
        runtime and NVML change together, as on a node), lets `fraction` of a refresh interval
        pass, collects a cycle."""
        self.model.record(self.clock.now)
        self.model.note_runtime_seen()
        self.pipeline.sync()
        self._run(self.pipeline.advance(fraction * REFRESH))
        self.output = self._run(self.pipeline.cycle())  # type: ignore[assignment]
        self.model.note_runtime_listed(self.clock.now, REFRESH)

    def _pod(
        self, name: str, containers: list[tuple[str, list[tuple[str, str]]]], app: str, late: bool
    ) -> Pod:
        """A new pod instance; each grant takes the form it asked for when the device allows
        it, else the form the device's holders share, else it is left out."""
        built = []
        taken: set[str] = set()
        for index, (team, grants) in enumerate(containers):
            mine = []
            for device, wanted in grants:
                forms = self.model.free_forms(device)
                if device in taken or not forms:
                    continue
                form = wanted if wanted in forms else forms[0]
                tag = str(self.model.new_id()) if form in ("replica", "dra_share") else ""
                mine.append(Grant(device, form, tag))
                taken.add(device)
            built.append(Container(CONTAINER_NAMES[index], self.model.new_cid(), team, tuple(mine)))
        n = self.model.new_id()
        successor = name in self.named
        self.named.add(name)
        return Pod(
            name=name,
            uid=f"uid-{n}",
            sandbox=f"{n:064x}"[::-1],
            app=app,
            containers=tuple(built),
            in_runtime=not late,
            visible_at=None if late else self.clock.now,
            successor=successor,
        )

    def _end_processes(self, pod: Pod) -> None:
        cids = {c.cid for c in pod.containers}
        for pid in [p for p, proc in self.model.processes.items() if proc.cid in cids]:
            del self.model.processes[pid]

    # --- node events -----------------------------------------------------------------------

    @rule(**POD)
    def create_pod(
        self,
        name: str,
        containers: list[tuple[str, list[tuple[str, str]]]],
        app: str,
        late: bool,
        dt: float,
    ) -> None:
        if name not in self.model.pods and not self.model.undecidable(name):
            self.model.pods[name] = self._pod(name, containers, app, late)
        self._collect(dt)

    @rule(name=st.sampled_from(POD_NAMES), dt=STEP)
    def delete_pod(self, name: str, dt: float) -> None:
        pod = self.model.pods.pop(name, None)
        if pod is not None:
            self._end_processes(pod)
        self._collect(dt)

    @rule(**POD)
    def recreate_pod(
        self,
        name: str,
        containers: list[tuple[str, list[tuple[str, str]]]],
        app: str,
        late: bool,
        dt: float,
    ) -> None:
        """Deleted and created again under its name: new uid, container IDs, maybe other GPUs
        and other labels (a Job's retry, a StatefulSet's pod)."""
        if not self.model.undecidable(name):
            old = self.model.pods.pop(name, None)
            if old is not None:
                self._end_processes(old)
            self.model.pods[name] = self._pod(name, containers, app, late)
        self._collect(dt)

    @rule(**POD)
    def recreate_pod_while_kubelet_stale(
        self,
        name: str,
        containers: list[tuple[str, list[tuple[str, str]]]],
        app: str,
        late: bool,
        dt: float,
    ) -> None:
        """Recreated under its name while the kubelet's answer lags the runtime: the kubelet
        keeps answering, but lists the node as it was (the old pod on its old devices) until
        `kubelet_catches_up`: its last answer, again. Drawn for a pod that answer lists and
        container_env has listed; while the kubelet is stale, no pod is created under the
        name of one it lists that container_env never listed (`NodeModel.undecidable`): a
        pod uid the agent has never seen cannot be told from a new one."""
        model = self.model
        old = model.pods.get(name)
        answered = (
            model.kubelet_stale if model.kubelet_stale is not None else model.kubelet_answered
        )
        if (
            old is not None
            and old.uid in model.runtime_listed
            and any(p.uid == old.uid for p in answered)
            and not model.undecidable(name)
            and not model.replaced_undecidably(answered)
        ):
            if model.kubelet_stale is None:
                model.kubelet_stale = model.kubelet_answered
                self._kubelet_outage()
            self._end_processes(old)
            self.model.pods[name] = self._pod(name, containers, app, late)
        self._collect(dt)

    @rule(dt=STEP)
    def kubelet_catches_up(self, dt: float) -> None:
        self.model.kubelet_stale = None
        self._kubelet_outage()
        self._collect(dt)

    def _kubelet_outage(self) -> None:
        """The kubelet's consumer may show older truths while it fails or lags."""
        up = self.model.kubelet == "ok" and self.model.kubelet_stale is None
        self.model.set_source(self.model.kubelet_outages, up, self.clock.now)

    @rule(name=st.sampled_from(POD_NAMES), dt=STEP)
    def runtime_records_appear(self, name: str, dt: float) -> None:
        pod = self.model.pods.get(name)
        if pod is not None and not pod.in_runtime:
            self.model.pods[name] = replace(pod, in_runtime=True, visible_at=self.clock.now)
        self._collect(dt)

    @rule(which=st.integers(0, 8), device=st.sampled_from(PROCESS_DEVICES), dt=STEP)
    def start_process(self, which: int, device: str, dt: float) -> None:
        """A GPU process in one of the live containers (`which` past their count: the host)."""
        cids = sorted(c.cid for pod in self.model.pods.values() for c in pod.containers)
        cid = cids[which] if which < len(cids) else ""
        pid = 1000 + self.model.new_id()
        self.model.processes[pid] = Process(pid, device, cid)
        self._collect(dt)

    @precondition(lambda self: bool(self.model.processes))
    @rule(which=st.integers(0, 8), dt=STEP)
    def end_process(self, which: int, dt: float) -> None:
        pids = sorted(self.model.processes)
        del self.model.processes[pids[which % len(pids)]]
        self._collect(dt)

    @rule(gpu=st.integers(0, GPU_COUNT - 1), dt=STEP)
    def lose_gpu(self, gpu: int, dt: float) -> None:
        self.model.lost.add(gpu)
        self._collect(dt)

    @rule(gpu=st.integers(0, GPU_COUNT - 1), code=st.sampled_from(XID_CODES), dt=STEP)
    def xid(self, gpu: int, code: int, dt: float) -> None:
        if gpu not in self.model.lost:
            self._run(self.pipeline.inject_xid(gpu, code))
        self._collect(dt)

    @rule(mode=st.sampled_from(["ok", "error", "slow"]), dt=STEP)
    def kubelet(self, mode: str, dt: float) -> None:
        self.model.kubelet = mode
        self._kubelet_outage()
        self._collect(dt)

    @rule(up=st.booleans(), dt=STEP)
    def runtime(self, up: bool, dt: float) -> None:
        self.model.runtime_up = up
        self.model.set_source(self.model.runtime_outages, up, self.clock.now)
        self._collect(dt)

    @precondition(lambda self: self.model.kubelet_stale is None)
    @rule(dt=STEP)
    def reload(self, dt: float) -> None:
        """Fresh receiver, processors and exporters on the same node, as SIGHUP builds them.
        Not while the kubelet lags: a fresh container_env has never seen the old pod uid, so
        a stale pair cannot be told from the new pod's (k8s_attributes' README says so)."""
        self._run(self.pipeline.reload())
        self.model.runtime_listed.clear()  # a fresh container_env has listed nothing yet
        self.model.runtime_seen.clear()
        self.model.listed_from = self.clock.now
        # A new exporter knows nothing of what the old one sent: what ended across the
        # reload is not closed (docs/troubleshooting.md says so); judged afresh from here.
        self.downstream = Downstream()
        self._collect(dt)

    @rule(dt=st.sampled_from([0.5, 1.0]))
    def wait(self, dt: float) -> None:
        self._collect(dt)

    # --- the invariants ----------------------------------------------------------------------

    @invariant()
    def outputs_are_true(self) -> None:
        if self.output is None:
            return
        windows = Windows.of(self.model, self.clock.now, REFRESH, CATCH_UP)
        check_all(read_prometheus(self.output.otel, OTEL), windows, IGNORE)
        check_all(read_prometheus(self.output.dcgm, DCGM), windows, IGNORE)
        check_all(read_otlp(self.output.otlp), windows, IGNORE)
        if "downstream" not in IGNORE:
            lingering = self.downstream.lingering(self.output.otlp)
            assert not lingering, "[7 downstream] ended, never closed: " + "; ".join(lingering)


def _settings() -> settings:
    soak = os.environ.get("OTELGPU_PROPERTY_PROFILE") == "soak"
    return settings(
        max_examples=int(os.environ.get("OTELGPU_PROPERTY_EXAMPLES", "100000" if soak else "50")),
        stateful_step_count=int(os.environ.get("OTELGPU_PROPERTY_STEPS", "60" if soak else "25")),
        deadline=None,
        database=None,
        derandomize=not soak,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


TestNodeHistories = NodeHistories.TestCase
TestNodeHistories.settings = _settings()
