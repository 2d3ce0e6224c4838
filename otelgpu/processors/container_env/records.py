"""One runtime container reduced to what may be exported: identity plus filtered keys.

The CRI facts this relies on (containerd's CRI plugin and the kubelet's dockershim):
- containerd labels every CRI container `io.cri-containerd.kind: container|sandbox`;
  dockershim labels them `io.kubernetes.docker.type: container|podsandbox`; the OCI spec
  annotation `io.kubernetes.cri.container-type` says the same.
- The kubelet labels containers with `io.kubernetes.pod.name`, `io.kubernetes.pod.namespace`,
  `io.kubernetes.pod.uid` and `io.kubernetes.container.name`.
- The pod's own labels are the labels of its sandbox (pause) container, and the pod's
  annotations are the sandbox's OCI spec annotations (containerd) or its labels prefixed
  `annotation.` (dockershim; the docker adapter turns those back into annotations).
- A container names its sandbox in containerd's `sandbox` field, the spec annotation
  `io.kubernetes.cri.sandbox-id`, or dockershim's label `io.kubernetes.sandbox.id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from otelgpu.processors.container_env.audit import Audit
from otelgpu.processors.container_env.keys import KeySelector
from otelgpu.processors.container_env.owners import owners
from otelgpu.processors.container_env.runtime import ContainerRef, ContainerSpec, env_pairs

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
CRI_KIND = "io.cri-containerd.kind"
DOCKERSHIM_TYPE = "io.kubernetes.docker.type"
DOCKERSHIM_SANDBOX_ID = "io.kubernetes.sandbox.id"
CRI_CONTAINER_TYPE = "io.kubernetes.cri.container-type"
CRI_SANDBOX_ID = "io.kubernetes.cri.sandbox-id"
CRI_SANDBOX_NAME = "io.kubernetes.cri.sandbox-name"
CRI_SANDBOX_NAMESPACE = "io.kubernetes.cri.sandbox-namespace"
CRI_CONTAINER_NAME = "io.kubernetes.cri.container-name"


@dataclass(frozen=True, slots=True)
class Record:
    """A container after the key rules: safe to keep for as long as it exists.

    For a workload container `labels` went through the `labels` filter and `env` through
    `env`; for a sandbox `labels` went through `pod_labels` and `annotations` through
    `annotations`, and `env` is always empty (the pause container's env is never read).
    A sandbox's `owners` are its pod's owner attributes (`k8s.deployment.name`, ...), read
    from its unfiltered labels (names only, never values of other labels).
    """

    id: str
    revision: str
    sandbox: bool
    namespace: str
    pod: str
    container: str
    pod_uid: str
    sandbox_id: str
    created: float
    env: Mapping[str, str]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owners: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Selectors:
    """The four key selectors, built once from the config, and whether owners are read."""

    env: KeySelector
    labels: KeySelector
    pod_labels: KeySelector
    annotations: KeySelector
    owners: bool


def is_sandbox(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Whether a container is a pod sandbox (pause container), by any runtime's marker."""
    return (
        labels.get(CRI_KIND) == "sandbox"
        or labels.get(DOCKERSHIM_TYPE) == "podsandbox"
        or annotations.get(CRI_CONTAINER_TYPE) == "sandbox"
    )


def extract(ref: ContainerRef, spec: ContainerSpec, selectors: Selectors, audit: Audit) -> Record:
    """Reduces one listed container (and its spec) to a `Record`, counting what the rules did."""
    labels, annotations = ref.labels, spec.annotations
    sandbox = is_sandbox(labels, annotations)
    if sandbox:
        label_sel = selectors.pod_labels.select(labels.items())
        ann_sel = selectors.annotations.select(annotations.items())
        env_values: dict[str, str] = {}
        selections = (label_sel, ann_sel)
        sections = (selectors.pod_labels.section, selectors.annotations.section)
    else:
        label_sel = selectors.labels.select(labels.items())
        env_sel = selectors.env.select(env_pairs(spec.env))
        ann_sel = None
        env_values = env_sel.values
        selections = (label_sel, env_sel)
        sections = (selectors.labels.section, selectors.env.section)
    for section, selection in zip(sections, selections, strict=True):
        audit.refused(section, selection.refused)
        audit.truncated(selection.truncated)

    def ident(label: str, annotation: str) -> str:
        return labels.get(label) or annotations.get(annotation) or ""

    pod = ident(POD_NAME, CRI_SANDBOX_NAME)
    return Record(
        id=ref.id,
        revision=ref.revision,
        sandbox=sandbox,
        namespace=ident(POD_NAMESPACE, CRI_SANDBOX_NAMESPACE),
        pod=pod,
        container="" if sandbox else ident(CONTAINER_NAME, CRI_CONTAINER_NAME),
        pod_uid=labels.get(POD_UID, ""),
        sandbox_id=ref.id
        if sandbox
        else ref.sandbox_id or ident(DOCKERSHIM_SANDBOX_ID, CRI_SANDBOX_ID),
        created=ref.created,
        env=env_values,
        labels=label_sel.values,
        annotations=ann_sel.values if ann_sel is not None else {},
        owners=owners(pod, labels) if sandbox and selectors.owners else {},
    )
