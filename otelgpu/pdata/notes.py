"""Names of the notes processors leave for each other on a resource (`ResourceMetrics.notes`).

Notes travel with a resource through one pipeline and are never exported. They let a later
processor check what an earlier one knew without either reaching into the other; two
(`DCGM_LEFT_OUT`, `DCGM_FROM_GPU`) are read by an exporter, never sent.

Times in notes (`HOLDER_SINCE`, `HOLDERS_CONFIRMED`, `HOLDERS_CHANGED`) are monotonic seconds
on the agent's clock (`otelgpu.component.clock.AGENT_CLOCK`, handed to every component as
`Settings.clock`): the processor that reads them compares them with times off its own Settings'
clock, which is the same one. A component given a clock of its own (a test) must give the
processors on either side of a note the same one.
"""

# On a GPU process's resource, from k8s_attributes: the containers the kubelet allocated the
# process's GPU (or MIG instance) to, as a frozenset of (namespace, pod, container); an empty
# set when the kubelet knows the device and nobody holds it. Absent when the kubelet cannot say.
GPU_HOLDERS = "gpu.holders"

# On a GPU or MIG resource, from the nvml receiver when it reads processes but emits no
# per-process metric: the processes NVML lists on the device, as a tuple of (pid, container
# id or "" for none found), so the squatter check runs without a series per process.
# k8s_attributes adds GPU_HOLDERS beside it.
GPU_PROCESSES = "gpu.processes"

# On a GPU or MIG resource (and its processes'), from the nvml receiver: True where the
# Prometheus exporter's `naming: dcgm` does not serve the device, so that it serves
# dcgm-exporter's device set (`receivers::nvml::dcgm_devices`, its `-d`). Other namings and the
# push exporters serve the device; absent when dcgm naming serves it.
DCGM_LEFT_OUT = "dcgm.left_out"

# On a MIG instance's resource, from the nvml receiver, where `naming: dcgm` serves the instance
# in its GPU's place (DCGM_LEFT_OUT on the GPU): (the GPU's identity, the names of the GPU's
# metrics dcgm-exporter serves on each instance: temperature, power, clocks, XID, ...). That
# naming renders those metrics of the GPU's resource in the same batch, as the pipeline left
# them, as the instance's own series; other namings and the push exporters never do.
DCGM_FROM_GPU = "dcgm.from_gpu"

# On a GPU or MIG resource labelled with its one holder, and on each allocation resource, from
# k8s_attributes: since when (the agent clock's monotonic seconds) the kubelet lists that
# container on that device; -inf for what its first answer after a start already listed. A
# runtime listing that began before it may still hold a deleted pod's container under the name.
HOLDER_SINCE = "holder.since"

# Beside HOLDER_SINCE: when the kubelet last answered (the same clock). A container the runtime
# first listed after that may be a new pod under a deleted pod's name, which the kubelet has not
# yet said holds the device.
HOLDERS_CONFIRMED = "holders.confirmed"

# Beside HOLDER_SINCE: since when the kubelet lists the holder's pod (namespace and name) as it
# does now (the same clock; -inf for what the first answer installed since a start lists, even
# one that came only after failures: a pair of such a pod may have been listed for any time
# before, whatever its HOLDER_SINCE). The kubelet names pods, not
# pod uids, and its answer can lag the runtime: a pod recreated under its name may still be
# listed on its old pod's devices. container_env gives a pair listed while an older pod uid ran
# under the name to that uid: the newer pod's labels wait until what the kubelet lists for the
# pod changes after the newer container may have started.
HOLDERS_CHANGED = "holders.changed"
