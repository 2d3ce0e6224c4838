"""Regenerates the pod-resources v1 message stubs from `podresources.proto` with grpcio-tools.

Run from anywhere: `python -m otelgpu.processors.k8s_attributes._proto.generate`.
The stubs are committed; a unit test regenerates them into a temporary folder and
compares, so the .proto and the stubs cannot drift apart. Only the messages ship: the agent
calls the kubelet by method path (`pod_resources.py`), so no service stub is generated here;
the tests' kubelet stand-in serves the service from one of its own
(`tests/peers/_proto/generate.py`, with `service=True`).
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO = PROTO_DIR / "podresources.proto"
# The include root is the repository root, so generated imports are absolute
# (`from otelgpu.processors.k8s_attributes._proto import podresources_pb2`).
ROOT = PROTO_DIR.parents[3]
OUTPUTS = ("podresources_pb2.py", "podresources_pb2.pyi")
SERVICE_OUTPUT = "podresources_pb2_grpc.py"


def generate(out_root: Path, *, service: bool = False) -> Path:
    """Writes the message stubs under `out_root` (mirroring the package path), and with
    `service` the gRPC service stub too; returns their folder."""
    from grpc_tools import protoc  # a test/dev dependency, not needed at run time

    rel = PROTO.relative_to(ROOT)
    args = [
        "grpc_tools.protoc",
        f"-I{ROOT}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        *([f"--grpc_python_out={out_root}"] if service else []),
        str(rel),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {rel}")
    return out_root / rel.parent


def main() -> int:
    """Regenerates the committed stubs in place."""
    generate(ROOT)
    print("regenerated", ", ".join(OUTPUTS), "in", PROTO_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
