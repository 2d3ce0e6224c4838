"""The channel policy every gRPC peer of the agent shares: grpcio channel arguments, each one
set on purpose (grpcio's defaults are part of our behaviour under attack too).

- **No retries by grpcio** (`grpc.enable_retries` 0): every failed call goes back to the
  caller, whose own loop decides when to ask again, with its own back-off (the refresher's
  List and the exporter's Export are idempotent: see their docs). grpcio's transparent retry
  of a call the server never began has no bound: a peer that answers GOAWAY and keeps the
  connection open has the call sent again on that connection without end, and the client
  grows by gigabytes in seconds. Without it such a call fails UNAVAILABLE at once. With
  retries off grpcio keeps no retry buffer, so `grpc.per_rpc_retry_buffer_size` is moot. The
  one retry that stays is bounded and ours: a stream the server reset with REFUSED_STREAM
  (never processed; a server at its stream limit does so) is sent again at most six times,
  after doubling pauses of 5 to 160 ms, while the call's deadline leaves room
  (`client.REFUSED_RETRIES`, `client.REFUSED_PAUSE`).
- **Answer size**: `max_receive` per peer, sized to what that peer can legitimately send in
  one message (a streamed answer's limit holds for each of its messages).
  grpcio checks a message's declared length before reading it and checks a compressed one
  while inflating, so neither a large nor a compressed answer grows past the limit. An
  answer within it still costs its bytes and more: sent in 1-byte DATA frames, grpcio spends
  about 16 bytes per byte of it while it arrives. The bound per hostile peer is therefore
  stated in terms of its limit (docs/architecture.md, "gRPC peers"), and each peer's limit
  is kept near its real answers.
- **Receive window** (`grpc.http2.bdp_probe` 0): grpcio's bandwidth-delay probe widens a
  stream's receive window to megabytes on a fast link, and grpcio reads and holds what the
  window lets in ahead of the caller: a streamed answer in 1-byte DATA frames then costs 16
  bytes per byte of the window, however small each message. Without the probe the window
  stays at HTTP/2's 64 KiB, widened by grpcio only to fit the message being read, so a
  streamed answer costs per message (the `max_receive` limit), not per answer. Every peer of
  the agent is a local socket or answers in small messages, so no throughput is lost.
- **Keepalive** as the Collector's `configgrpc` client: a PING after 10 s without frames while
  a call is open, the connection dropped when its answer takes 10 s more; no PINGs on an idle
  connection (servers refuse those by default, and an idle channel reconnects on its next call
  anyway). Any PING unanswered for the keepalive timeout (grpcio's flow-control probes too)
  drops the connection: a peer gone silent fails the calls open on it, and the next call dials
  again. A server that finds the PINGs too frequent answers GOAWAY `too_many_pings`; grpcio
  then doubles its interval on that channel.
- **A bad connection is dialled again**: keepalive cannot see a peer that answers PINGs (or
  floods them) while it stalls every call. `Client` retires its channel after a call fails
  UNAVAILABLE, DEADLINE_EXCEEDED or INTERNAL, so the next call dials a new connection.
  grpcio's `grpc.max_connection_age_ms` and `grpc.max_connection_idle_ms` are server
  settings, which a channel ignores; the client's own idle limit (`idle_timeout`,
  `grpc.client_idle_timeout_ms`) releases a connection no call has used for that long, so a
  stalled or flooding connection is not kept between two far-apart calls either.
- **Reconnecting** is grpcio's: a lost connection is dialled again with grpcio's jittered
  exponential backoff, from `initial_backoff` up to `max_backoff`. A caller passes its own
  refresh interval as `max_backoff`, so a peer that came back is reached within one refresh.
- **Deadlines** are per call (`Client.unary`'s and `Client.stream`'s `timeout`, the latter
  for the whole streamed answer), also sent to the server.
- **Proxies**: grpcio reads `grpc_proxy`, `https_proxy`, `http_proxy` and `no_proxy` for TCP
  targets (OTLP); unix sockets are never proxied (`proxy=False`).
- **One connection per peer**: each channel has its own subchannel pool, so two components
  never share (or retire) each other's connection.
"""

from __future__ import annotations

from dataclasses import dataclass

KEEPALIVE_TIME = 10.0  # seconds; the Collector's configgrpc default
KEEPALIVE_TIMEOUT = 10.0
INITIAL_BACKOFF = 0.25
MAX_BACKOFF = 5.0
MAX_SEND = 64 * 2**20  # the largest request the agent sends (an OTLP batch is far smaller)
# Longer than any caller's pause between calls (refresh and export intervals are seconds), so
# a working connection is kept between them; one unused for this long is released.
IDLE_TIMEOUT = 300.0


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
    idle_timeout: float = IDLE_TIMEOUT
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
            # No retries by grpcio, transparent ones included: they have no bound.
            ("grpc.enable_retries", 0),
            ("grpc.client_idle_timeout_ms", int(self.idle_timeout * 1000)),
            ("grpc.enable_http_proxy", int(self.proxy)),
            ("grpc.primary_user_agent", self.user_agent),
            # Each peer gets its own connection: two components never share a subchannel.
            ("grpc.use_local_subchannel_pool", 1),
            # No receive window grown to the bandwidth-delay product: see "Receive window".
            ("grpc.http2.bdp_probe", 0),
        ]
        if self.authority:
            options.append(("grpc.default_authority", self.authority))
        if credentials is not None and credentials.server_name:
            options.append(("grpc.ssl_target_name_override", credentials.server_name))
        return options
