"""The committed pod-resources stubs are exactly what the committed .proto generates."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from otelgpu.processors.k8s_attributes._proto import generate
from otelgpu.processors.k8s_attributes._proto import podresources_pb2 as pb
from tests.peers._proto import generate as service_stub
from tests.peers._proto import podresources_pb2_grpc as rpc


def test_committed_stubs_describe_the_proto(tmp_path: Path):
    # Independent of the grpcio-tools version: the schema compiled from the .proto now
    # equals the schema embedded in the committed stubs.
    out = tmp_path / "podresources.desc"
    rel = generate.PROTO.relative_to(generate.ROOT)
    assert (
        protoc.main(["protoc", f"-I{generate.ROOT}", f"--descriptor_set_out={out}", str(rel)]) == 0
    )
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in compiled.message_type:  # protoc adds json names; Python stubs leave them out
        for field in message.field:
            field.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    assert compiled == committed, "podresources_pb2.py is stale: run generate.py"


def test_committed_stubs_are_the_generator_output(tmp_path: Path):
    fresh = generate.generate(tmp_path)
    assert sorted(p.name for p in fresh.glob("podresources_pb2*")) == sorted(generate.OUTPUTS)
    tools = importlib.metadata.version("grpcio-tools")
    if tools != rpc.GRPC_GENERATED_VERSION:  # another generator writes other boilerplate
        return
    for name in generate.OUTPUTS:
        committed = (generate.PROTO_DIR / name).read_text()
        assert (fresh / name).read_text() == committed, f"{name} is stale: run generate.py"


def test_the_agent_ships_no_service_stub():
    """The agent calls the kubelet by method path: a service stub in its package would be
    code nothing runs."""
    assert sorted(p.name for p in generate.PROTO_DIR.glob("podresources_pb2*")) == sorted(
        generate.OUTPUTS
    )


def test_the_stand_ins_service_stub_is_the_generator_output(tmp_path: Path):
    fresh = service_stub.generate(tmp_path)
    tools = importlib.metadata.version("grpcio-tools")
    if tools != rpc.GRPC_GENERATED_VERSION:  # another generator writes other boilerplate
        assert "PodResourcesListerStub" in fresh.read_text()
        return
    assert fresh.read_text() == service_stub.OUTPUT.read_text(), (
        "tests/peers/_proto/podresources_pb2_grpc.py is stale: run python -m tests.peers._proto.generate"
    )


def test_method_paths_and_fields_are_the_kubelets():
    service = pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name for m in service.methods} == {"List", "GetAllocatableResources", "Get"}
    fields = pb.ContainerDevices.DESCRIPTOR.fields_by_name
    assert (fields["resource_name"].number, fields["device_ids"].number) == (1, 2)
    pod = pb.PodResources.DESCRIPTOR.fields_by_name
    assert (pod["name"].number, pod["namespace"].number, pod["containers"].number) == (1, 2, 3)
    containers = pb.ContainerResources.DESCRIPTOR.fields_by_name
    assert (containers["name"].number, containers["devices"].number) == (1, 2)
    assert pb.ListPodResourcesResponse.DESCRIPTOR.fields_by_name["pod_resources"].number == 1
    assert pb.AllocatableResourcesResponse.DESCRIPTOR.fields_by_name["devices"].number == 1
