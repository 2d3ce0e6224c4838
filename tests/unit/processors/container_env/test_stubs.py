"""The committed containerd stubs are what the committed .proto files generate, with
containerd's service paths and field numbers."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import grpc_tools
import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from otelgpu.processors.container_env import containerd as containerd_mod

PROTO_DIR = Path(containerd_mod.__file__).parent / "_proto"
ROOT = PROTO_DIR.parents[3]
PACKAGE = "otelgpu.processors.container_env._proto"
PROTOS = ("containers", "mount", "task", "tasks")
# google/protobuf/*.proto ship inside grpcio-tools (`python -m grpc_tools.protoc` adds them).
WELL_KNOWN = Path(grpc_tools.__file__).parent / "_proto"


def _module(name: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"{PACKAGE}.{name}_pb2")


@pytest.mark.parametrize("name", PROTOS)
def test_committed_stubs_describe_the_proto(tmp_path: Path, name: str) -> None:
    # Independent of the grpcio-tools version: the schema compiled from the .proto now
    # equals the schema embedded in the committed stubs.
    out = tmp_path / f"{name}.desc"
    rel = (PROTO_DIR / f"{name}.proto").relative_to(ROOT)
    args = ["protoc", f"-I{ROOT}", f"-I{WELL_KNOWN}", f"--descriptor_set_out={out}", str(rel)]
    assert protoc.main(args) == 0
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    _clear_json_names(compiled.message_type)
    committed = descriptor_pb2.FileDescriptorProto.FromString(
        _module(name).DESCRIPTOR.serialized_pb
    )
    assert compiled == committed, f"{name}_pb2.py is stale: run _proto/generate.sh"


def test_the_generator_writes_exactly_the_committed_stubs(tmp_path: Path) -> None:
    """generate.sh, run on a copy of the .proto files, writes the message stubs the package
    ships and nothing else: no service stubs (the processor calls containerd by method path)."""
    copy = tmp_path / PROTO_DIR.relative_to(ROOT)
    copy.mkdir(parents=True)
    for proto in PROTOS:
        shutil.copyfile(PROTO_DIR / f"{proto}.proto", copy / f"{proto}.proto")
    shutil.copyfile(PROTO_DIR / "generate.sh", copy / "generate.sh")
    python = Path(sys.executable).parent  # the script runs `python -m grpc_tools.protoc`
    env = {"PATH": f"{python}:/usr/bin:/bin"}
    subprocess.run(["sh", str(copy / "generate.sh")], check=True, env=env, timeout=120)
    generated = sorted(p.name for p in copy.iterdir() if p.name.endswith((".py", ".pyi")))
    committed = sorted(p.name for p in PROTO_DIR.glob("*_pb2*"))
    assert generated == committed
    assert not [name for name in committed if "grpc" in name]


def _clear_json_names(messages) -> None:  # type: ignore[no-untyped-def]
    """protoc adds json names (nested messages too); the Python stubs leave them out."""
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _clear_json_names(message.nested_type)


def test_tasks_service_and_fields_are_containerds() -> None:
    tasks, task = _module("tasks"), _module("task")
    service = tasks.DESCRIPTOR.services_by_name["Tasks"]
    assert service.full_name == containerd_mod.TASKS
    assert tasks.ListTasksResponse.DESCRIPTOR.fields_by_name["tasks"].number == 1
    fields = task.Process.DESCRIPTOR.fields_by_name
    assert (fields["container_id"].number, fields["id"].number, fields["status"].number) == (
        1,
        2,
        4,
    )
    assert (task.CREATED, task.RUNNING, task.STOPPED, task.PAUSED, task.PAUSING) == (1, 2, 3, 4, 5)
    assert {task.RUNNING, task.PAUSED, task.PAUSING} == containerd_mod.LIVE_TASK_STATES
    create = tasks.CreateTaskRequest.DESCRIPTOR.fields_by_name
    assert (create["container_id"].number, create["rootfs"].number) == (1, 3)
    mount = _module("mount").Mount.DESCRIPTOR.fields_by_name
    assert [mount[f].number for f in ("type", "source", "target", "options")] == [1, 2, 3, 4]


def test_containers_service_and_fields_are_containerds() -> None:
    containers = _module("containers")
    service = containers.DESCRIPTOR.services_by_name["Containers"]
    assert service.full_name == containerd_mod.CONTAINERS
    fields = containers.Container.DESCRIPTOR.fields_by_name
    numbers = {name: fields[name].number for name in ("id", "labels", "spec", "sandbox")}
    assert numbers == {"id": 1, "labels": 2, "spec": 5, "sandbox": 11}
    update = containers.UpdateContainerRequest.DESCRIPTOR.fields_by_name
    assert (update["container"].number, update["update_mask"].number) == (1, 2)
