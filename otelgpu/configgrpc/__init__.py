"""gRPC client side for every peer the agent dials: the kubelet's pod-resources socket,
containerd's socket and an OTLP endpoint, all on grpcio's asyncio API (`grpc.aio`).

One channel policy lives here (`policy.py`), so the peers differ only in what they must:
where they listen, how large an answer they may legitimately send, and their credentials.
`client.py` is the one call shape the agent needs (one request, one answer, as bytes), with the
outcome as `RpcError` when it is not OK.
"""

from otelgpu.configgrpc.client import Client, Metadata, RpcError, StatusCode
from otelgpu.configgrpc.policy import ChannelPolicy, Credentials

__all__ = ["ChannelPolicy", "Client", "Credentials", "Metadata", "RpcError", "StatusCode"]
