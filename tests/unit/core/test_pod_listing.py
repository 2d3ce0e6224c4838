"""The pod listing the service shares: answers ordered by the tickets of their requests, a
failure forgets the listing, one graph has one listing for all its components."""

from __future__ import annotations

from otelgpu.component.pod_listing import PodListings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.graph import build

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
POD = ("ml", "train-0")


def test_an_answer_to_an_older_request_than_the_installed_one_is_left_out() -> None:
    """Two pipelines' k8s_attributes asking one socket: the slower, older request's answer
    must not replace what a newer request already said."""
    listings = PodListings()
    older, newer = listings.asking(SOCKET), listings.asking(SOCKET)
    listings.answered(SOCKET, newer, [POD])
    mark = listings.began()
    assert mark is not None
    mark = listings.ended(mark)
    listings.answered(SOCKET, older, [])  # the pod "gone" per an answer from before
    assert listings.listed_throughout(mark) is None  # still no answer after the read
    listings.answered(SOCKET, listings.asking(SOCKET), [POD])
    assert listings.listed_throughout(mark) == {POD}


def test_a_pod_missing_from_one_answer_starts_a_new_run() -> None:
    listings = PodListings()
    listings.answered(SOCKET, listings.asking(SOCKET), [POD])
    mark = listings.began()
    assert mark is not None
    mark = listings.ended(mark)
    listings.answered(SOCKET, listings.asking(SOCKET), [])
    listings.answered(SOCKET, listings.asking(SOCKET), [POD])
    assert listings.listed_throughout(mark) == frozenset()


def test_one_graph_hands_one_listing_to_every_component() -> None:
    text = """
receivers:
  kubelet_stats: {endpoint: "127.0.0.1:10250", auth_type: none, read_only_port: true}
processors:
  k8s_attributes: {}
exporters:
  debug: {}
service:
  pipelines:
    metrics/a: {receivers: [kubelet_stats], processors: [k8s_attributes], exporters: [debug]}
    metrics/b: {receivers: [kubelet_stats], processors: [k8s_attributes], exporters: [debug]}
"""
    registry = builtin_registry()
    graph = build(validate(load([("p.yaml", text)]), registry), registry, SelfTelemetry())
    settings = [
        c._settings  # what each component was handed
        for c in (*graph.receivers.values(), *graph.processors.values())
    ]
    assert len(settings) == 3
    assert all(s.pod_listings is graph.pod_listings for s in settings)
