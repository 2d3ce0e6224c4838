"""Unary gRPC calls on HTTP/2 (`h2`): the client side every gRPC peer of the agent needs."""

from otelgpu.rpc.channel import Address, Channel
from otelgpu.rpc.status import Metadata, RpcError, StatusCode

__all__ = ["Address", "Channel", "Metadata", "RpcError", "StatusCode"]
