"""Configuration of the `container_env` processor."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from otelgpu.config.types import KeyFilter, PositiveDuration, StrictModel

DEFAULT_CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock"

# The config loader's logger: `otelgpu validate` prints its warnings, `run` logs them.


# What a glob says literally: the pattern without `*`, `?` and `[...]` classes.
_WILDCARDS = re.compile(r"\*|\?|\[[^\]]*\]")


def is_bare_wildcard(pattern: str) -> bool:
    """Whether `pattern` is a glob with no literal letter or digit (`*`, `**`, `*_*`, `[A-Z]*`):
    it matches keys by nothing they say."""
    literal = _WILDCARDS.sub("", pattern)
    return literal != pattern and not any(ch.isalnum() for ch in literal)


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f'must be an absolute path (got "{value}")')
    return value


class ContainerdConfig(StrictModel):
    """`containerd`: the gRPC socket and the containerd namespace the kubelet's CRI uses."""

    socket: str = DEFAULT_CONTAINERD_SOCKET
    namespace: str = Field(default="k8s.io", min_length=1)

    _check_socket = field_validator("socket")(_absolute)


class DockerConfig(StrictModel):
    """`docker`: the Engine API's unix socket."""

    socket: str = DEFAULT_DOCKER_SOCKET

    _check_socket = field_validator("socket")(_absolute)


class ContainerEnvProcessorConfig(StrictModel):
    """`processors::container_env`.

    runtime: `auto` (probe containerd and docker until one answers, use every one that
      does), `containerd` or `docker`.
    containerd: `{socket: /run/containerd/containerd.sock, namespace: k8s.io}`.
    docker: `{socket: /var/run/docker.sock}`.
    refresh_interval: how often the container snapshot is rebuilt (10s); a container seen
      in a batch but not in the snapshot triggers one early refresh (at most one a second).
    timeout: the limit of one runtime request (5s).
    env, labels, pod_labels, annotations: `{include: [...], exclude: [...]}` of exact keys
      or globs, for the container's environment, the container's labels, the pod's labels
      (from its sandbox) and the pod's annotations (from its sandbox). Empty include lists:
      nothing is exported unless asked for. A key only a glob matches exports only plainly
      safe values (`values.plain_refusal`).
    allow_secret_like_keys: export keys that look like secrets (`*TOKEN*`, `*SECRET*`,
      `*PASSWORD*`, `*PASSWD*`, `*KEY*`, `*CREDENTIAL*`, `*_CREDS`, `*_TOK`, ..., any case)
      when included (false).
    max_value_length: longer values are cut to this many characters (256).
    max_attributes: the most attributes added to one resource (32; owners not counted).
    owners: add the pod's workload owners read from its labels and name, without the API
      server (`k8s.deployment.name`, `k8s.statefulset.name`, `k8s.job.name`,
      `k8s.cronjob.name`, JobSet, Kueue, Ray, LeaderWorkerSet; README, Workload owners) (true).
    """

    runtime: Literal["auto", "containerd", "docker"] = "auto"
    containerd: ContainerdConfig = Field(default_factory=ContainerdConfig)
    docker: DockerConfig = Field(default_factory=DockerConfig)
    refresh_interval: PositiveDuration = 10.0
    timeout: PositiveDuration = 5.0
    env: KeyFilter = Field(default_factory=KeyFilter)
    labels: KeyFilter = Field(default_factory=KeyFilter)
    pod_labels: KeyFilter = Field(default_factory=KeyFilter)
    annotations: KeyFilter = Field(default_factory=KeyFilter)
    allow_secret_like_keys: bool = False
    max_value_length: int = Field(default=256, gt=0)
    max_attributes: int = Field(default=32, gt=0)
    owners: bool = True

    @field_validator("env", "annotations")
    @classmethod
    def _refuse_bare_wildcards(cls, value: KeyFilter, info: ValidationInfo) -> KeyFilter:
        """Env and annotations carry passwords, tokens and connection strings next to run IDs,
        and no rule can tell them apart by the value alone: only the operator's word for a
        key, or a glob with a literal part, may include one (validate, run and reload)."""
        bare = [p for p in value.include if is_bare_wildcard(p)]
        if bare:
            raise ValueError(
                f'include "{bare[0]}" matches every {info.field_name} key, and no rule can tell '
                f"a password from a run ID by its value: write a glob with a literal part "
                f'(TEAM_*, *_RUN_ID, example.com/*) or name the keys (README, "Choosing keys")'
            )
        return value
