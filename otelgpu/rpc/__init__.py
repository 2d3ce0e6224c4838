"""Unary gRPC calls on HTTP/2 (`h2`): the client side every gRPC peer of the agent needs."""

from otelgpu.rpc.channel import Channel
from otelgpu.rpc.connection import Address
from otelgpu.rpc.status import Metadata, RpcError, StatusCode

__all__ = ["Address", "Channel", "Metadata", "RpcError", "StatusCode"]
