#!/bin/sh
# Regenerates the Python message stubs beside the .proto files (run from anywhere; needs
# grpcio-tools). No service stubs: the processor calls containerd by method path.
# The import root is the repository, so the generated modules import each other by package path.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
for proto in containers mount task tasks; do
  python -m grpc_tools.protoc -I . \
    --python_out=. --pyi_out=. \
    "otelgpu/processors/container_env/_proto/$proto.proto"
done
