"""Regenerates `podresources_pb2_grpc.py`, the pod-resources service stub the kubelet stand-in
(`tests/peers/kubelet.py`) serves with, from the agent's `podresources.proto`.

Run from anywhere: `python -m tests.peers._proto.generate`. The agent ships only the message
stubs (`otelgpu/processors/k8s_attributes/_proto/generate.py`): it calls the kubelet by method
path. The generated stub imports the messages from the agent's package, so both speak the
same schema; `tests/unit/processors/k8s_attributes/test_stubs.py` holds it to the generator's
output.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from otelgpu.processors.k8s_attributes._proto import generate as messages

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / messages.SERVICE_OUTPUT


def generate(out_root: Path) -> Path:
    """Writes the service stub (and the message stubs beside it) under `out_root`; returns
    the service stub's path."""
    return messages.generate(out_root, service=True) / messages.SERVICE_OUTPUT


def main() -> int:
    """Regenerates the committed service stub in place."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(generate(Path(tmp)), OUTPUT)
    print("regenerated", OUTPUT.name, "in", HERE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
