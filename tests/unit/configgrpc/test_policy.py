"""`ChannelPolicy.options`: the documented policy (the Collector's configgrpc keepalive, grpcio's
reconnect backoff bounded by the caller, the answer and request limits) as the grpcio channel
arguments that carry it. grpcio ignores an argument it does not know, so a misspelt name or a
wrong unit would change nothing visible: the names and values are the contract here. What the
arguments do on the wire is in test_client.py and test_hostile_peers.py."""

from __future__ import annotations

from otelgpu.configgrpc import ChannelPolicy, Credentials

MiB = 2**20


def test_the_defaults_are_the_documented_policy() -> None:
    assert dict(ChannelPolicy().options()) == {
        "grpc.max_receive_message_length": 4 * MiB,
        "grpc.max_send_message_length": 64 * MiB,
        # keepalive as the Collector's configgrpc: a PING after 10 s without frames while a
        # call is open, dropped 10 s later; never on an idle connection
        "grpc.keepalive_time_ms": 10_000,
        "grpc.keepalive_timeout_ms": 10_000,
        "grpc.http2.ping_timeout_ms": 10_000,
        "grpc.keepalive_permit_without_calls": 0,
        "grpc.http2.max_pings_without_data": 0,
        # reconnecting: from 0.25 s up to 5 s
        "grpc.initial_reconnect_backoff_ms": 250,
        "grpc.min_reconnect_backoff_ms": 250,
        "grpc.max_reconnect_backoff_ms": 5_000,
        # no retries by grpcio, not even transparent ones (unbounded: a GOAWAY loop)
        "grpc.enable_retries": 0,
        # a connection no call used for 5 minutes is released
        "grpc.client_idle_timeout_ms": 300_000,
        "grpc.enable_http_proxy": 1,
        "grpc.primary_user_agent": "otelgpu",
        "grpc.use_local_subchannel_pool": 1,
        # the receive window is not widened to the bandwidth-delay product: a streamed answer
        # in 1-byte frames costs per message, not per window (test_hostile_peers.py)
        "grpc.http2.bdp_probe": 0,
    }


def test_a_peer_s_own_limits_and_keepalive_are_in_milliseconds() -> None:
    options = dict(
        ChannelPolicy(
            max_receive=64 * MiB,
            keepalive_time=0.05,
            keepalive_timeout=2.5,
            idle_timeout=1.5,
            user_agent="probe",
        ).options()
    )
    assert options["grpc.client_idle_timeout_ms"] == 1500
    assert options["grpc.max_receive_message_length"] == 64 * MiB
    assert options["grpc.keepalive_time_ms"] == 50
    assert options["grpc.keepalive_timeout_ms"] == options["grpc.http2.ping_timeout_ms"] == 2500
    assert options["grpc.primary_user_agent"] == "probe"


def test_the_caller_s_max_backoff_bounds_reconnecting_from_100_ms() -> None:
    def backoff(max_backoff: float) -> tuple[object, object, object]:
        options = dict(ChannelPolicy(max_backoff=max_backoff).options())
        return (
            options["grpc.initial_reconnect_backoff_ms"],
            options["grpc.min_reconnect_backoff_ms"],
            options["grpc.max_reconnect_backoff_ms"],
        )

    assert backoff(60.0) == (250, 250, 60_000)  # a refresh interval of a minute
    assert backoff(0.2) == (200, 200, 200)  # the first wait never exceeds the longest
    assert backoff(0.101) == (101, 101, 101)
    assert backoff(0.05) == (100, 100, 100)  # grpcio's own floor, set explicitly


def test_unix_sockets_are_never_proxied() -> None:
    assert dict(ChannelPolicy(proxy=False).options())["grpc.enable_http_proxy"] == 0


def test_an_authority_and_a_server_name_are_set_only_when_given() -> None:
    bare = dict(ChannelPolicy().options(Credentials()))
    assert "grpc.default_authority" not in bare and "grpc.ssl_target_name_override" not in bare
    named = dict(
        ChannelPolicy(authority="localhost").options(Credentials(server_name="collector.example"))
    )
    assert named["grpc.default_authority"] == "localhost"
    assert named["grpc.ssl_target_name_override"] == "collector.example"
    assert "grpc.ssl_target_name_override" not in dict(ChannelPolicy().options(None))
