"""Real running tasks in a private containerd, as the CRI plugin keeps for live containers.

A task runs `/bin/sleep 3600` from busybox-static through containerd's runc v2 shim, on a
rootfs that is a bind mount of a folder beside the daemon's socket. Everything that could
clash with another containerd on the machine is private to this one: the runc state root
(`<root>/runc`, passed as the runc shim's `root` option) and the cgroup parent.
Uses the processor's own generated stubs (`_proto/tasks_pb2.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import shutil
import signal
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory

from tests.peers.runtime import require_binary

tasks_pb: Any = importlib.import_module("otelgpu.processors.container_env._proto.tasks_pb2")
mount_pb: Any = importlib.import_module("otelgpu.processors.container_env._proto.mount_pb2")

SERVICE = "/containerd.services.tasks.v1.Tasks/"
RUNC_OPTIONS_TYPE = "containerd.runc.v1.Options"
SLEEP_ARGS = ["/bin/sleep", "3600"]
_TIMEOUT = 30


def _runc_options_class() -> Any:
    """containerd's runc shim options message (containerd.runc.v1.Options), only its `root`
    field (number 7): built from a descriptor here because nothing else needs it."""
    file = descriptor_pb2.FileDescriptorProto(
        name="otelgpu_tests/runc_options.proto", package="containerd.runc.v1", syntax="proto3"
    )
    message = file.message_type.add(name="Options")
    message.field.add(
        name="root",
        number=7,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("containerd.runc.v1.Options"))


_RuncOptions = _runc_options_class()


def daemon_root(socket: Path) -> Path:
    """The private containerd's folder (its socket lives there: `Containerd.socket`)."""
    return socket.parent


def runc_options(socket: Path) -> bytes:
    """The runc shim options that keep this containerd's runc state private."""
    root = daemon_root(socket) / "runc"
    return bytes(_RuncOptions(root=str(root)).SerializeToString())


def _cgroup_parent(socket: Path) -> str:
    salt = hashlib.sha256(str(daemon_root(socket)).encode()).hexdigest()[:12]
    return f"otelgpu-test-{salt}"


def cgroup_path(socket: Path, container_id: str) -> str:
    """A cgroup under a parent private to this containerd, so parallel runs never collide."""
    return f"/{_cgroup_parent(socket)}/{container_id[:32]}"


def remove_cgroup_parents(socket: Path) -> None:
    """Removes the (empty, once every task is deleted) cgroup parents runc left behind."""
    for parent in Path("/sys/fs/cgroup").glob(f"*/{_cgroup_parent(socket)}"):
        with contextlib.suppress(OSError):
            parent.rmdir()


def rootfs(socket: Path) -> Path:
    """A folder holding busybox-static as /bin/busybox and /bin/sleep, and the /dev and
    /proc mount points (made once)."""
    folder = daemon_root(socket) / "busybox-rootfs"
    sleep = folder / "bin" / "sleep"
    if not sleep.exists():
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        (folder / "dev").mkdir(exist_ok=True)
        (folder / "proc").mkdir(exist_ok=True)
        shutil.copy(require_binary("busybox"), folder / "bin" / "busybox")
        shutil.copy(folder / "bin" / "busybox", sleep)
    return folder


def _call(socket: Path, method: str, request: Any, response: Any, namespace: str) -> Any:
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        call = channel.unary_unary(
            SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response.FromString,
        )
        return call(request, metadata=(("containerd-namespace", namespace),), timeout=_TIMEOUT)


def start_task(socket: Path, container_id: str, namespace: str) -> int:
    """Creates and starts the task of an existing container record; returns its host pid."""
    mount = mount_pb.Mount(type="bind", source=str(rootfs(socket)), options=["rbind", "ro"])
    _call(
        socket,
        "Create",
        tasks_pb.CreateTaskRequest(container_id=container_id, rootfs=[mount]),
        tasks_pb.CreateTaskResponse,
        namespace,
    )
    started = _call(
        socket,
        "Start",
        tasks_pb.StartRequest(container_id=container_id),
        tasks_pb.StartResponse,
        namespace,
    )
    return int(started.pid)


def stop_task(socket: Path, container_id: str, namespace: str) -> None:
    """Kills the task (SIGKILL), waits for its exit and deletes it; the record stays, as the
    CRI plugin leaves an exited container's record until the kubelet removes it."""
    kill = tasks_pb.KillRequest(container_id=container_id, signal=signal.SIGKILL, all=True)
    _call(socket, "Kill", kill, empty_pb2.Empty, namespace)
    wait = tasks_pb.WaitRequest(container_id=container_id)
    _call(socket, "Wait", wait, tasks_pb.WaitResponse, namespace)
    delete = tasks_pb.DeleteTaskRequest(container_id=container_id)
    _call(socket, "Delete", delete, tasks_pb.DeleteResponse, namespace)


def task_states(socket: Path, namespace: str) -> dict[str, int]:
    """Container ID → task status (containerd.v1.types.Status) of every task."""
    listed = _call(
        socket, "List", tasks_pb.ListTasksRequest(), tasks_pb.ListTasksResponse, namespace
    )
    # containerd names a task by its container's ID in `id` (container_id stays empty).
    return {t.id or t.container_id: int(t.status) for t in listed.tasks}


def stop_all(socket: Path, namespace: str) -> None:
    """Stops every task in `namespace` (used before the daemon stops: shims outlive it)."""
    for container_id in task_states(socket, namespace):
        stop_task(socket, container_id, namespace)
    remove_cgroup_parents(socket)
