"""The workload that owns a pod, from its labels and name alone (no API server).

The runtime has the pod's labels (on its sandbox) but not its owner references, so owners are
read from the labels the controllers put on the pods they create, and from how they name them:

- `k8s.replicaset.name`, `k8s.deployment.name`: `pod-template-hash`; the pod is
  `<deployment>-<hash>-<5 random>`;
- `k8s.statefulset.name`: `statefulset.kubernetes.io/pod-name` = `<statefulset>-<ordinal>`;
- `k8s.daemonset.name`: `controller-revision-hash` + `pod-template-generation`; the pod is
  `<daemonset>-<5 random>`;
- `k8s.job.name`: `batch.kubernetes.io/job-name` (1.27+) or `job-name`;
- `k8s.cronjob.name`: a Job named `<cronjob>-<8+ digits>` (a heuristic, see `_cronjob`);
- `k8s.jobset.name`: `jobset.sigs.k8s.io/jobset-name`;
- `kueue.queue.name`: `kueue.x-k8s.io/local-queue-name`, else `kueue.x-k8s.io/queue-name`;
  `kueue.cluster_queue.name`: `kueue.x-k8s.io/cluster-queue-name`;
- `ray.cluster.name`, `ray.node.type`: KubeRay's `ray.io/cluster`, `ray.io/node-type`;
- `k8s.leaderworkerset.name`: `leaderworkerset.sigs.k8s.io/name`.

Owners stack, and every one that applies is given: a LeaderWorkerSet's pods are also a
StatefulSet's, a JobSet's and a CronJob's are also a Job's; Kueue's queue is not an owner but
says whose quota the GPU counts against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

POD_TEMPLATE_HASH = "pod-template-hash"
STATEFULSET_POD_NAME = "statefulset.kubernetes.io/pod-name"
CONTROLLER_REVISION_HASH = "controller-revision-hash"
POD_TEMPLATE_GENERATION = "pod-template-generation"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
KUEUE_LOCAL_QUEUE = ("kueue.x-k8s.io/local-queue-name", "kueue.x-k8s.io/queue-name")
KUEUE_CLUSTER_QUEUE = "kueue.x-k8s.io/cluster-queue-name"
RAY_CLUSTER = "ray.io/cluster"
RAY_NODE_TYPE = "ray.io/node-type"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"

K8S_REPLICASET_NAME = "k8s.replicaset.name"
K8S_DEPLOYMENT_NAME = "k8s.deployment.name"
K8S_STATEFULSET_NAME = "k8s.statefulset.name"
K8S_DAEMONSET_NAME = "k8s.daemonset.name"
K8S_JOB_NAME = "k8s.job.name"
K8S_CRONJOB_NAME = "k8s.cronjob.name"
K8S_JOBSET_NAME = "k8s.jobset.name"
KUEUE_QUEUE_NAME = "kueue.queue.name"
KUEUE_CLUSTER_QUEUE_NAME = "kueue.cluster_queue.name"
RAY_CLUSTER_NAME = "ray.cluster.name"
RAY_NODE_TYPE_NAME = "ray.node.type"
K8S_LWS_NAME = "k8s.leaderworkerset.name"

# The 5 characters the API server appends to a generateName (consonants and digits).
_GENERATED = re.compile(r"^(?P<base>.+)-[a-z0-9]{5}$")
_ORDINAL = re.compile(r"^(?P<base>.+)-\d+$")
# A CronJob names each Job `<cronjob>-<scheduled time in minutes since the epoch>`: 8 digits
# since 1979 and for centuries to come.
_SCHEDULED = re.compile(r"^(?P<cronjob>.+)-\d{8,10}$")
MAX_NAME = 253


def owners(pod: str, labels: Mapping[str, str]) -> dict[str, str]:
    """Every owner attribute `labels` (the pod's own, unfiltered) and the pod name give."""
    found: dict[str, str] = {}
    _controllers(pod, labels, found)
    job = _first(labels, JOB_NAME_LABELS)
    if job:
        found[K8S_JOB_NAME] = job
        cronjob = _cronjob(job, labels)
        if cronjob:
            found[K8S_CRONJOB_NAME] = cronjob
    plain = (
        (K8S_JOBSET_NAME, (JOBSET_NAME,)),
        (KUEUE_QUEUE_NAME, KUEUE_LOCAL_QUEUE),
        (KUEUE_CLUSTER_QUEUE_NAME, (KUEUE_CLUSTER_QUEUE,)),
        (RAY_CLUSTER_NAME, (RAY_CLUSTER,)),
        (RAY_NODE_TYPE_NAME, (RAY_NODE_TYPE,)),
        (K8S_LWS_NAME, (LWS_NAME,)),
    )
    for attribute, keys in plain:
        value = _first(labels, keys)
        if value:
            found[attribute] = value
    return found


def _controllers(pod: str, labels: Mapping[str, str], found: dict[str, str]) -> None:
    """The apps/v1 controller: Deployment (via its ReplicaSet), StatefulSet or DaemonSet."""
    template_hash = labels.get(POD_TEMPLATE_HASH, "")
    if template_hash:
        generated = _GENERATED.match(pod)
        replicaset = generated["base"] if generated else ""
        # The ReplicaSet is `<deployment>-<hash>`; a long name was cut before the suffix
        # (the pod name keeps 58 characters of it), and then the deployment is unknown.
        if replicaset.endswith("-" + template_hash):
            found[K8S_REPLICASET_NAME] = replicaset
            found[K8S_DEPLOYMENT_NAME] = replicaset[: -len(template_hash) - 1]
        return
    if labels.get(STATEFULSET_POD_NAME):
        ordinal = _ORDINAL.match(labels[STATEFULSET_POD_NAME])
        if ordinal:
            found[K8S_STATEFULSET_NAME] = ordinal["base"]
        return
    if labels.get(CONTROLLER_REVISION_HASH) and labels.get(POD_TEMPLATE_GENERATION):
        generated = _GENERATED.match(pod)
        if generated:
            found[K8S_DAEMONSET_NAME] = generated["base"]


def _cronjob(job: str, labels: Mapping[str, str]) -> str:
    """The CronJob of a Job, guessed from the Job's name: pods carry no CronJob label, and the
    Job's `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation stays on the Job. A
    hand-made Job named like `backup-20240101` would be taken for CronJob `backup`; a Job a
    JobSet made (`<jobset>-<replicated job>-<index>`) never is."""
    if labels.get(JOBSET_NAME):
        return ""
    scheduled = _SCHEDULED.match(job)
    return scheduled["cronjob"] if scheduled else ""


def _first(labels: Mapping[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = labels.get(key, "")
        if value:
            return value[:MAX_NAME]
    return ""
