"""Building the agent image with the test dockerd, and running it the way the DaemonSet does.

The build uses the release workflow's build step (.github/workflows/release.yml: its context,
Dockerfile and build arguments, tests/deploy/workflow.py), for this machine's architecture
only. On top of those, the base image comes from `tests/deploy/base_image.py` (debootstrap +
`docker import`), passed as the Dockerfile's `BASE_IMAGE` build argument, and pip's wheels from
a local wheelhouse. The build runs with the host's network so that pip reaches PyPI (the test
dockerd has no bridge); the container runs with none.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

import otelgpu
from tests.deploy import base_image, wheelhouse, workflow

TAG = f"otelgpu:{otelgpu.__version__}"


def import_base(client: docker.DockerClient) -> str:
    """Imports the cached debootstrap tarball (made on first use); returns its image name."""
    tarball = base_image.build_tarball()
    repo, tag = base_image.IMAGE.split(":")
    client.api.import_image(src=str(tarball), repository=repo, tag=tag)
    return base_image.IMAGE


def build(client: docker.DockerClient, base: str) -> tuple[Any, str]:
    """Builds the Dockerfile on `base` with the wheelhouse; returns the image and build log."""
    log: list[str] = []
    with wheelhouse.served(wheelhouse.cached("amd64")) as wheels:
        args = {**release_build().build_args, "BASE_IMAGE": base}
        args |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheels}
        try:
            image, chunks = _build(client, args)
        except docker.errors.BuildError as error:
            text = "".join(str(c.get("stream", c.get("error", ""))) for c in error.build_log)
            raise AssertionError(f"docker build failed: {error.msg}\n{text[-5000:]}") from error
    log.extend(str(c.get("stream", "")) for c in chunks)
    return image, "".join(log)


def release_build() -> workflow.ImageBuild:
    """The release workflow's build step for this version."""
    return workflow.image_build(otelgpu.__version__)


def _build(client: docker.DockerClient, args: dict[str, str]) -> tuple[Any, Any]:
    spec = release_build()
    return client.images.build(
        path=str(spec.context),
        dockerfile=spec.dockerfile,
        tag=TAG,
        buildargs=args,
        network_mode="host",
        rm=True,
        forcerm=True,
    )


@dataclass(frozen=True)
class Mount:
    """A read-only bind mount: host path → container path."""

    host: Path
    container: str


def run_like_daemonset(
    client: docker.DockerClient,
    *,
    name: str,
    pipeline: Path,
    mounts: list[Mount],
    env: dict[str, str],
    memory_limit: str,
) -> Any:
    """Starts the image as the DaemonSet's pod spec does: uid 0 with every capability
    dropped, no privilege escalation, a read-only root filesystem with a small in-memory
    /tmp, the pipeline file mounted read-only at the path the image's CMD reads, host paths
    mounted read-only, and the DaemonSet's memory limit. No network but loopback."""
    volumes = {str(pipeline.parent): {"bind": "/etc/otelgpu", "mode": "ro"}}
    volumes.update({str(m.host): {"bind": m.container, "mode": "ro"} for m in mounts})
    return client.containers.run(
        TAG,
        name=name,
        detach=True,
        user="0:0",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs={"/tmp": "rw,size=16m"},
        network_mode="none",
        volumes=volumes,
        environment=env,
        mem_limit=memory_limit,
    )


_FETCH = """
import json, sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(json.dumps([r.status, r.read().decode()]))
except urllib.error.HTTPError as e:
    print(json.dumps([e.code, e.read().decode()]))
except OSError as e:
    print(json.dumps([0, str(e)]))
"""


def http_get(container: Any, url: str) -> tuple[int, str]:
    """GETs `url` from inside the container with its own python (the pod has no other
    network to reach it from); status 0 means the connection failed."""
    result = container.exec_run(["python3", "-c", _FETCH, url])
    if result.exit_code != 0:
        raise AssertionError(f"exec {shlex.join(['python3', url])}: {result.output!r}")
    status, body = json.loads(result.output.decode())
    return int(status), str(body)


def rss_kib(container: Any) -> int:
    """The agent's resident set (pid 1 of the container) in KiB, from /proc/1/status."""
    result = container.exec_run(["cat", "/proc/1/status"])
    for line in result.output.decode().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/1/status: {result.output!r}")


def unmount_under(root: Path) -> None:
    """Detaches what the stopped dockerd left mounted under `root` (its exec-root keeps a
    bind mount of the host network namespace, `netns/default`), so the folder can go."""
    mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounted if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "-l", point], check=False, timeout=30)
