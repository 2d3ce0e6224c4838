"""The release path against a real OCI registry (tests/peers/registry.py, Debian's
docker-registry on loopback): what .github/workflows/release.yml publishes can be pulled back
by someone with no credentials, and the chart it pulls installs the image it pushed.

The release workflow's own settings and scripts run here, with its registry (`REGISTRY`,
`IMAGE`, `CHART_REPOSITORY`) moved from ghcr.io to the local registry:

- the image is built with the build step's context, Dockerfile and build arguments
  (tests/deploy/image.py; this machine's architecture only) and pushed under the build step's
  tag by the test dockerd;
- the chart step's script runs as it is, with a `helm` on PATH that is Helm's Go SDK
  (helm-python-sdk): `helm package`, `helm registry login`, `helm push` (over plain HTTP, as
  `--plain-http` does, since the local registry has no TLS);
- then, with no credentials: the image is pulled by the digest the push gave and run; the chart
  is pulled by its `oci://` URL and version and by its digest, linted, and rendered with the
  pushed image, which the registry then serves under the reference the chart names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import otelgpu
from tests.deploy import helm, workflow
from tests.deploy import image as agent_image
from tests.deploy.test_manifests import agent
from tests.peers.registry import Registry, registry
from tests.peers.runtime import Dockerd, docker_daemon

pytestmark = pytest.mark.integration

VERSION = otelgpu.__version__
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
CHART_STEP = "Package and push the chart"

_HELM = """#!{python}
# `helm` for the workflow's chart step: Helm's Go SDK, against the local registry (plain HTTP).
import json, sys
import helm_python
args = sys.argv[1:]
client = helm_python.RegistryClient(plain_http=True, credentials_file={credentials!r})
log = open({log!r}, "a")
if args[0] == "package":
    print(helm_python.package(args[1], destination=args[args.index("--destination") + 1]))
elif args[:2] == ["registry", "login"] and "--password-stdin" in args:
    user = args[args.index("--username") + 1]
    client.login(args[2], user, sys.stdin.read(), plain_http=True)
    log.write(json.dumps(["login", args[2], user]) + "\\n")
elif args[0] == "push":
    client.push(args[1], args[2], plain_http=True)
    log.write(json.dumps(["push", args[1], args[2]]) + "\\n")
else:
    sys.exit("unexpected helm " + " ".join(args))
"""


@dataclass(frozen=True)
class Released:
    """What the release steps pushed to the local registry."""

    registry: Registry
    dockerd: Dockerd
    env: dict[str, str]  # the workflow's env, moved to the local registry
    image_digest: str
    helm_log: list[list[str]]


def _local(value: str, address: str) -> str:
    """A workflow value (`ghcr.io/...`, `oci://ghcr.io/...`) on the local registry."""
    registry_host = workflow.env()["REGISTRY"]
    assert registry_host in value, value
    return value.replace(registry_host, address, 1)


def _repository(reference: str, address: str) -> str:
    """`127.0.0.1:PORT/otelgpu/otelgpu:TAG` → `otelgpu/otelgpu`."""
    return reference.removeprefix("oci://").removeprefix(f"{address}/").split(":")[0]


def _push_image(client: Any, tag: str) -> str:
    """Pushes `tag` with the test dockerd; returns the manifest digest the registry gave."""
    repository, version = tag.rsplit(":", 1)
    digests = []
    for line in client.api.push(repository, version, stream=True, decode=True):
        assert "error" not in line, line
        if "Digest" in line.get("aux", {}):
            digests.append(line["aux"]["Digest"])
    assert len(digests) == 1, digests
    return str(digests[0])


def _run_chart_step(tmp: Path, env: dict[str, str]) -> list[list[str]]:
    """Runs the workflow's chart step in a checkout-shaped folder; returns the helm calls."""
    work = tmp / "work"
    (work / "deploy" / "helm").mkdir(parents=True)
    os.symlink(helm.CHART, work / "deploy" / "helm" / "otelgpu")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = tmp / "helm.log"
    shim = bin_dir / "helm"
    shim.write_text(
        _HELM.format(python=sys.executable, credentials=str(tmp / "creds.json"), log=str(log))
    )
    shim.chmod(0o755)
    script = tmp / "step.sh"
    script.write_text(workflow.script(CHART_STEP, VERSION))
    step_env = workflow.step_env(CHART_STEP, VERSION, GITHUB_TOKEN="release-token")
    result = subprocess.run(
        [*BASH, str(script)],
        cwd=work,
        env={
            **os.environ,
            **env,
            **step_env,
            "GITHUB_ACTOR": "release-bot",
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Released]:
    root = tmp_path_factory.mktemp("release")
    try:
        with registry(root / "registry") as local, docker_daemon(root / "docker") as dockerd:
            env = {
                "REGISTRY": local.address,
                "IMAGE": _local(workflow.env()["IMAGE"], local.address),
                "CHART_REPOSITORY": _local(workflow.env()["CHART_REPOSITORY"], local.address),
            }
            client = dockerd.client()
            built, _log = agent_image.build(client, agent_image.import_base(client))
            (tag,) = agent_image.release_build().tags
            pushed = _local(tag, local.address)
            assert built.tag(*pushed.rsplit(":", 1))
            digest = _push_image(client, pushed)
            # Nothing of the build stays on the daemon: what runs later was pulled back.
            client.images.remove(pushed, force=True)
            client.images.remove(agent_image.TAG, force=True)
            calls = _run_chart_step(root, env)
            yield Released(local, dockerd, env, digest, calls)
    finally:
        agent_image.unmount_under(root)


def test_the_workflow_pushes_the_chart_to_its_chart_repository(released: Released) -> None:
    assert released.helm_log == [
        ["login", released.registry.address, "release-bot"],
        ["push", f"dist/otelgpu-{VERSION}.tgz", released.env["CHART_REPOSITORY"]],
    ]


def test_the_image_is_pulled_back_anonymously_by_digest_and_runs(released: Released) -> None:
    address = released.registry.address
    repository = _repository(released.env["IMAGE"], address)
    by_tag = released.registry.manifest(repository, VERSION)
    assert (by_tag.status, by_tag.digest) == (200, released.image_digest)
    by_digest = released.registry.manifest(repository, released.image_digest)
    assert by_digest.status == 200 and by_digest.body_digest == released.image_digest
    client = released.dockerd.client()
    reference = f"{released.env['IMAGE']}@{released.image_digest}"
    pulled = client.images.pull(reference)
    assert reference in pulled.attrs["RepoDigests"]
    out = client.containers.run(reference, ["--version"], remove=True, network_mode="none")
    assert out.decode().strip() == f"otelgpu {VERSION}"


def _anonymous(tmp_path: Path) -> Any:
    """A Helm registry client that has never logged in anywhere."""
    return helm.engine().RegistryClient(plain_http=True, credentials_file=tmp_path / "none.json")


def test_the_chart_is_pulled_back_anonymously_by_url_and_by_digest(
    released: Released, tmp_path: Path
) -> None:
    engine = helm.engine()
    url = f"{released.env['CHART_REPOSITORY']}/otelgpu"
    client = _anonymous(tmp_path)
    assert client.tags(url) == [VERSION]
    resolved = client.resolve(f"{url}:{VERSION}")
    manifest = released.registry.manifest(_repository(url, released.registry.address), VERSION)
    assert (manifest.status, manifest.digest) == (200, resolved["digest"])
    by_version, by_digest = tmp_path / "by-version", tmp_path / "by-digest"
    by_version.mkdir()
    by_digest.mkdir()
    engine.pull(url, version=VERSION, destination=by_version, plain_http=True, client=client)
    engine.pull(
        f"{url}@{resolved['digest']}", destination=by_digest, plain_http=True, client=client
    )
    (archive,) = by_version.iterdir()
    (same,) = by_digest.iterdir()
    assert archive.name == f"otelgpu-{VERSION}.tgz"
    assert engine.digest(archive) == engine.digest(same)


def test_the_pulled_chart_lints_and_installs_the_pushed_image(
    released: Released, tmp_path: Path
) -> None:
    engine = helm.engine()
    url = f"{released.env['CHART_REPOSITORY']}/otelgpu"
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    engine.pull(
        url, version=VERSION, destination=pulled, plain_http=True, client=_anonymous(tmp_path)
    )
    archive = pulled / f"otelgpu-{VERSION}.tgz"
    lint = engine.lint(str(archive))
    assert lint["errors"] == [] and lint["total_charts_linted"] == 1, lint
    with engine.Chart.load(str(archive)) as chart:
        assert (chart.name, chart.version) == ("otelgpu", VERSION)

        def image(values: dict[str, Any]) -> str:
            files = chart.render(values, name=helm.RELEASE, namespace=helm.NAMESPACE)
            docs = [
                doc
                for path, text in files.items()
                if not path.endswith("NOTES.txt")
                for doc in yaml.safe_load_all(text)
                if doc
            ]
            return str(agent(docs)["image"])

        # As published: the workflow's image at the chart's version.
        assert image({}) == f"{workflow.env()['IMAGE']}:{VERSION}"
        # Pointed at the registry the release went to, by tag and by digest.
        local = {"repository": released.env["IMAGE"]}
        by_tag = image({"image": local})
        by_digest = image({"image": {**local, "digest": released.image_digest}})
    assert by_tag == f"{released.env['IMAGE']}:{VERSION}"
    assert by_digest == f"{released.env['IMAGE']}@{released.image_digest}"
    address = released.registry.address
    served = released.registry.manifest(_repository(by_tag, address), by_tag.rsplit(":", 1)[1])
    assert served.digest == released.image_digest
    client = released.dockerd.client()
    assert by_digest in client.images.pull(by_digest).attrs["RepoDigests"]
