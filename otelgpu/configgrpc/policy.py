"""The channel policy every gRPC peer of the agent shares: grpcio channel arguments.

- **Keepalive** as the Collector's `configgrpc` client: a PING after 10 s without frames while
  a call is open, the connection dropped when its answer takes 10 s more; no PINGs on an idle
  connection (servers refuse those by default, and an idle channel reconnects on its next call
  anyway). Any PING unanswered for the keepalive timeout (grpcio's flow-control probes too)
  drops the connection: a peer gone silent fails the calls open on it, and the next call dials
  again. A server that finds the PINGs too frequent answers GOAWAY `too_many_pings`; grpcio
  then doubles its interval on that channel.
- **Reconnecting** is grpcio's: a lost connection is dialled again with grpcio's jittered
  exponential backoff, from `initial_backoff` up to `max_backoff`. A caller passes its own
  refresh interval as `max_backoff`, so a peer that came back is reached within one refresh.
- **Answer size**: `max_receive` per peer, sized to what that peer can legitimately send.
  grpcio checks it against the message after decompression and stops inflating there, so a
  compressed answer cannot grow past it in memory.
- **Deadlines** are per call (`Client.unary`'s `timeout`), also sent to the server.
- **No retries by grpcio** beyond its transparent retry of a call that never left the client
  or that the server refused before reading it (`REFUSED_STREAM`, a GOAWAY before the stream):
  those the server never processed. Every other failure goes back to the caller, whose own
  loop decides (the refresher's List and the exporter's Export are idempotent: see their docs).
- **Proxies**: grpcio reads `grpc_proxy`, `https_proxy`, `http_proxy` and `no_proxy` for TCP
  targets (OTLP); unix sockets are never proxied (`proxy=False`).
"""

from __future__ import annotations

from dataclasses import dataclass

KEEPALIVE_TIME = 10.0  # seconds; the Collector's configgrpc default
KEEPALIVE_TIMEOUT = 10.0
INITIAL_BACKOFF = 0.25
MAX_BACKOFF = 5.0
MAX_SEND = 64 * 2**20  # the largest request the agent sends (an OTLP batch is far smaller)


@dataclass(frozen=True, slots=True)
class Credentials:
    """TLS for a TCP target: PEM bytes for the roots (None: grpcio's bundled roots), the client
    certificate chain and key (both or neither), and the name the server's certificate is
    checked against when it is not the target's host."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str = ""


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    """What a peer's channel may differ in; everything else is the shared policy above."""

    max_receive: int = 4 * 2**20
    max_backoff: float = MAX_BACKOFF
    keepalive_time: float = KEEPALIVE_TIME
    keepalive_timeout: float = KEEPALIVE_TIMEOUT
    proxy: bool = True
    authority: str = ""
    user_agent: str = "otelgpu"

    def options(self, credentials: Credentials | None = None) -> list[tuple[str, int | str]]:
        """The grpcio channel arguments of this policy."""
        max_backoff_ms = max(int(self.max_backoff * 1000), 100)
        initial_ms = min(int(INITIAL_BACKOFF * 1000), max_backoff_ms)
        options: list[tuple[str, int | str]] = [
            ("grpc.max_receive_message_length", self.max_receive),
            ("grpc.max_send_message_length", MAX_SEND),
            ("grpc.keepalive_time_ms", int(self.keepalive_time * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.keepalive_timeout * 1000)),
            # grpcio waits this long for any PING's answer (its keepalive's included) before
            # dropping the connection; its own default is a minute.
            ("grpc.http2.ping_timeout_ms", int(self.keepalive_timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.initial_reconnect_backoff_ms", initial_ms),
            ("grpc.min_reconnect_backoff_ms", initial_ms),
            ("grpc.max_reconnect_backoff_ms", max_backoff_ms),
            # No retry policy is configured, so only grpcio's transparent retries happen.
            ("grpc.enable_retries", 1),
            ("grpc.enable_http_proxy", int(self.proxy)),
            ("grpc.primary_user_agent", self.user_agent),
            # Each peer gets its own connection: two components never share a subchannel.
            ("grpc.use_local_subchannel_pool", 1),
        ]
        if self.authority:
            options.append(("grpc.default_authority", self.authority))
        if credentials is not None and credentials.server_name:
            options.append(("grpc.ssl_target_name_override", credentials.server_name))
        return options
