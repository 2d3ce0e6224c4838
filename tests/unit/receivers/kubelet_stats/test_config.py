"""The kubelet_stats config: defaults, endpoint resolution, auth and TLS consistency."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from otelgpu.receivers.kubelet_stats.config import AuthType, KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.metrics import CATALOG, Group

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_defaults() -> None:
    config = KubeletStatsReceiverConfig()
    assert config.collection_interval == 10.0
    assert config.timeout == 5.0
    assert config.metric_groups == [Group.NODE, Group.POD, Group.CONTAINER]
    assert config.effective_auth() is AuthType.SERVICE_ACCOUNT
    assert config.token_file == f"{SA}/token"
    assert config.effective_ca_file() == f"{SA}/ca.crt"
    assert config.summary_url({"K8S_NODE_NAME": "n1"}) == "https://n1:10250/stats/summary"
    assert config.enabled_metrics() == {s.name for s in CATALOG if s.group is not Group.VOLUME}


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ({"read_only_port": True}, "http://n1:10255/stats/summary"),
        ({"endpoint": "10.0.0.5:10250"}, "https://10.0.0.5:10250/stats/summary"),
        ({"endpoint": "https://kubelet.local:10250/"}, "https://kubelet.local:10250/stats/summary"),
        ({"endpoint": "http://127.0.0.1:10255"}, "http://127.0.0.1:10255/stats/summary"),
        ({"endpoint": "[::1]:10250"}, "https://[::1]:10250/stats/summary"),
        ({"endpoint": "node-a:10255", "read_only_port": True}, "http://node-a:10255/stats/summary"),
    ],
)
def test_summary_url(raw: dict[str, Any], url: str) -> None:
    config = KubeletStatsReceiverConfig.model_validate(raw)
    assert config.summary_url({"K8S_NODE_NAME": "n1"}) == url


def test_plain_http_means_no_token_and_no_tls() -> None:
    config = KubeletStatsReceiverConfig.model_validate({"read_only_port": True})
    assert config.effective_auth() is AuthType.NONE
    assert config.effective_ca_file() is None


def test_missing_node_name_is_explained() -> None:
    with pytest.raises(ValueError, match="K8S_NODE_NAME is not set"):
        KubeletStatsReceiverConfig().summary_url({})


def test_metric_switches_and_groups() -> None:
    config = KubeletStatsReceiverConfig.model_validate(
        {
            "metric_groups": ["volume"],
            "metrics": {
                "k8s.pod.volume.inode.count": {"enabled": False},
                "k8s.pod.cpu.time": {"enabled": True},
            },
        }
    )
    # A metric switched on outside the chosen groups stays off: groups decide first.
    assert config.enabled_metrics() == {
        "k8s.pod.volume.available",
        "k8s.pod.volume.capacity",
        "k8s.pod.volume.usage",
        "k8s.pod.volume.inode.free",
        "k8s.pod.volume.inode.used",
    }


def test_contrib_names_are_an_option_and_switched_by_their_own_names() -> None:
    config = KubeletStatsReceiverConfig.model_validate(
        {
            "metric_names": "contrib",
            "metric_groups": ["volume", "container"],
            "metrics": {"k8s.volume.inodes": {"enabled": False}},
        }
    )
    enabled = config.enabled_metrics()
    assert {"k8s.volume.available", "container.memory.major_page_faults"} <= enabled
    assert "k8s.volume.inodes" not in enabled and "k8s.pod.volume.available" not in enabled


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"metrics": {"k8s.volume.inodes": {"enabled": False}}},
            "metrics k8s.volume.inodes: not a name under metric_names semconv",
        ),
        (
            {"metric_names": "contrib", "metrics": {"k8s.pod.volume.usage": {"enabled": True}}},
            "metrics k8s.pod.volume.usage: not a name under metric_names contrib",
        ),
        (
            {"metrics": {"k8s.pod.gpu": {"enabled": True}}},
            'unknown metric "k8s.pod.gpu": not one of this receiver\'s',
        ),
        ({"metric_names": "otel"}, "metric_names"),
    ],
)
def test_a_name_of_the_other_naming_is_refused_saying_so(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        KubeletStatsReceiverConfig.model_validate(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"endpoint": "https://"}, "invalid endpoint"),
        ({"endpoint": "node:99999"}, "invalid endpoint"),
        ({"endpoint": "ftp://node:1"}, "invalid endpoint"),
        (
            {"endpoint": "https://node:10250", "read_only_port": True},
            "read_only_port is plain http",
        ),
        (
            {"endpoint": "http://node:10255", "auth_type": "serviceAccount"},
            "would send the token in clear",
        ),
        ({"insecure_skip_verify": True, "ca_file": "/ca.pem"}, "not both"),
        ({"metric_groups": []}, "at least 1"),
        ({"metric_groups": ["gpu"]}, "metric_groups"),
        ({"auth_type": "tls"}, "auth_type"),
        ({"metrics": {"k8s.pod.cpu.utilization": {"enabled": True}}}, "unknown metric"),
        ({"timeout": "0s"}, "timeout"),
        ({"collection_interval": 10}, "collection_interval"),
        ({"kubelet": "x"}, "kubelet"),
    ],
)
def test_invalid_configs_are_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match="(?s)" + message.replace(".", r"\.")):
        KubeletStatsReceiverConfig.model_validate(raw)
