"""Owner names at their edges: a Deployment is named only when the pod-template-hash is its own
dash-separated part of the name, and a DaemonSet only when both of its labels are there."""

from __future__ import annotations

import pytest

from otelgpu.processors.container_env.owners import owners


def test_a_hash_that_is_not_its_own_dash_separated_part_names_no_deployment() -> None:
    # the name ends in the hash, but glued to the word before it: no ReplicaSet made this name
    assert owners("trainer7d4b9c8f6d-x2k9q", {"pod-template-hash": "7d4b9c8f6d"}) == {}


def test_the_deployment_is_the_replicaset_name_without_its_dash_and_hash() -> None:
    got = owners("my-app-2-7d4b9c8f6d-x2k9q", {"pod-template-hash": "7d4b9c8f6d"})
    assert got == {
        "k8s.replicaset.name": "my-app-2-7d4b9c8f6d",
        "k8s.deployment.name": "my-app-2",
    }


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"controller-revision-hash": "5b547684d9"}, id="revision hash only"),
        pytest.param({"pod-template-generation": "1"}, id="template generation only"),
    ],
)
def test_one_of_the_two_daemonset_labels_alone_names_no_daemonset(labels: dict[str, str]) -> None:
    # e.g. a pod of another revision-tracking controller (a CloneSet's) carries only the hash
    assert owners("web-g4xms", labels) == {}
