"""Real container runtimes for tests: a private containerd and a private dockerd on it.

Everything lives under a temporary directory: sockets, state, images. Each daemon is started
as a child process and stopped by its pid. A missing binary fails the test loudly: in CI the
real peer is required (PEERS.md), never skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker

BUSYBOX_IMAGE = "otelgpu-test/busybox:1"


def require_binary(name: str) -> str:
    """The binary's path; raises with the install hint when it is missing."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        raise RuntimeError(
            f"{name} is not installed: the test needs the real peer "
            "(apt-get install -y containerd docker.io prometheus busybox-static docker-registry)"
        )
    return path


def wait_for_socket(path: Path, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    """Waits until `path` exists; raises with the daemon's log tail if it dies or times out."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"daemon did not create {path} (exit={proc.poll()}):\n{tail}")
        time.sleep(0.05)


@dataclass
class Containerd:
    """A private containerd: `start`, `kill` (SIGKILL, as a crash), `restart`, `stop`."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None
    started: bool = False  # ever: then tasks may still run under its shims

    @property
    def socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def log(self) -> Path:
        return self.root / "containerd.log"

    def start(self) -> None:
        binary = require_binary("containerd")
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "config.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{self.root}/root"\n'
            f'state = "{self.root}/state"\n'
            "[grpc]\n"
            f'  address = "{self.socket}"\n'
            "[ttrpc]\n"
            f'  address = "{self.socket}.ttrpc"\n'
        )
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [binary, "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        wait_for_socket(self.socket, self.proc, 20, self.log)
        self.started = True

    def kill(self) -> None:
        """Kills the daemon abruptly; its socket file is left behind, as after a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        """Stops the tasks the tests started (their shims would outlive the daemon), then
        the daemon. A daemon a test left killed is started once more to do so: only it can
        stop its tasks cleanly (unmount their rootfs, remove their cgroups)."""
        if self.proc is None and self.started:
            with contextlib.suppress(Exception):
                self.start()
        if self.proc is not None and self.proc.poll() is None:
            from tests.peers.containerd_tasks import stop_all  # it imports this module

            try:
                stop_all(self.socket, "k8s.io")
            except Exception as exc:  # the daemon must still stop; say what is left behind
                print(f"containerd {self.root}: tasks not stopped: {exc}")
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@dataclass
class RunningContainer:
    """A container started by the test dockerd: its full ID and its host pid."""

    id: str
    pid: int
    name: str


@dataclass
class Dockerd:
    """A private dockerd using a given containerd, with a busybox image imported."""

    root: Path
    containerd: Containerd
    proc: subprocess.Popen[bytes] | None = None
    containers: list[str] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, version="auto", timeout=30)

    def start(self) -> None:
        binary = require_binary("dockerd")
        self.root.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    "--data-root",
                    str(self.root / "data"),
                    "--exec-root",
                    str(self.root / "exec"),
                    "-H",
                    self.url,
                    "--iptables=false",
                    "--ip6tables=false",
                    "--bridge=none",
                    "--pidfile",
                    str(self.root / "docker.pid"),
                    "--containerd",
                    str(self.containerd.socket),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for_socket(self.socket, self.proc, 30, self.log)
        self._wait_ping()
        self._import_busybox()

    def _wait_ping(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client().ping()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _import_busybox(self) -> None:
        busybox = require_binary("busybox")
        image_dir = self.root / "image"
        (image_dir / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copy(busybox, image_dir / "bin" / "busybox")
        for tool in ("sleep", "sh"):
            link = image_dir / "bin" / tool
            if not link.exists():
                link.symlink_to("busybox")
        tar_path = self.root / "image.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(image_dir, arcname=".")
        repo, tag = BUSYBOX_IMAGE.split(":")
        self.client().api.import_image(src=str(tar_path), repository=repo, tag=tag)

    def run_container(
        self,
        name: str,
        *,
        env: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        command: tuple[str, ...] = ("/bin/sleep", "300"),
    ) -> RunningContainer:
        """Starts a detached container with no network; returns its ID and host pid."""
        container = self.client().containers.run(
            BUSYBOX_IMAGE,
            list(command),
            name=name,
            detach=True,
            network_mode="none",
            environment=env or {},
            labels=labels or {},
        )
        container.reload()
        self.containers.append(container.id)
        return RunningContainer(
            id=container.id, pid=int(container.attrs["State"]["Pid"]), name=name
        )

    def stop_container(self, container_id: str) -> None:
        """Stops (kills) a container; docker keeps it, exited, until it is removed."""
        self.client().api.kill(container_id)
        self.client().api.wait(container_id, timeout=30)

    def remove_container(self, container_id: str) -> None:
        self.client().api.remove_container(container_id, force=True)
        if container_id in self.containers:
            self.containers.remove(container_id)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(Exception):
            for cid in list(self.containers):
                self.remove_container(cid)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@contextlib.contextmanager
def containerd_daemon(root: Path) -> Iterator[Containerd]:
    """A started private containerd, stopped on exit."""
    daemon = Containerd(root)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@contextlib.contextmanager
def docker_daemon(root: Path) -> Iterator[Dockerd]:
    """A started private dockerd (on its own private containerd), both stopped on exit."""
    with containerd_daemon(root / "containerd") as containerd:
        daemon = Dockerd(root / "docker", containerd)
        try:
            daemon.start()
            yield daemon
        finally:
            daemon.stop()
