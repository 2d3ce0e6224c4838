"""print-config: effective options with defaults, secrets redacted."""

from __future__ import annotations

import yaml
from pydantic import SecretStr

from otelgpu.component.component import ComponentID, Kind
from otelgpu.config.loader import load
from otelgpu.config.render import REDACTED, _plain
from otelgpu.config.schema import validate
from otelgpu.config.types import StrictModel
from tests.components import core_registry


def test_render_shows_defaults_and_durations_as_text() -> None:
    text = "receivers:\n  sample:\nexporters:\n  debug:\nservice:\n  pipelines:\n    metrics:\n      receivers: [sample]\n      exporters: [debug]\n"
    config = validate(load([("f.yaml", text)], environ={}), core_registry())
    from otelgpu.config.render import render

    doc = yaml.safe_load(render(config))
    assert doc["receivers"]["sample"] == {
        "interval": "1s",
        "series": 2,
        "mode": "steady",
        "tags": [],
    }
    assert doc["service"]["pipelines"]["metrics"]["exporters"] == ["debug"]
    assert list(doc) == ["receivers", "exporters", "service"]  # in the config's own order
    assert list(doc["service"]) == ["extensions", "pipelines", "telemetry"]
    assert doc["service"]["extensions"] == []
    assert doc["service"]["pipelines"]["metrics"] == {
        "receivers": ["sample"],
        "processors": [],
        "exporters": ["debug"],
    }
    assert doc["service"]["telemetry"]["logs"]["level"] == "info"
    assert config.components[Kind.EXPORTER][ComponentID("debug")] is not None


class _Secrets(StrictModel):
    headers: dict[str, str] = {}
    token: SecretStr = SecretStr("")
    password_hash: str = ""
    endpoint: str = "x:1"
    bearer_value: SecretStr = SecretStr("")  # secret by its type alone


def test_a_secret_type_is_redacted_whatever_its_key() -> None:
    out = _plain(_Secrets(bearer_value=SecretStr("s3cret")))
    # the marker says a value is set and hidden: an empty one would read as "none set"
    assert out["bearer_value"] == "[REDACTED]"
    assert out["password_hash"] == ""  # a secret-looking key with nothing in it hides nothing


def test_the_yaml_is_in_block_style() -> None:
    text = "receivers:\n  sample:\nexporters:\n  debug:\nservice:\n  pipelines:\n    metrics:\n      receivers: [sample]\n      exporters: [debug]\n"
    from otelgpu.config.render import render

    rendered = render(validate(load([("f.yaml", text)], environ={}), core_registry()))
    assert rendered.startswith("receivers:\n  sample:\n")
    assert "{" not in rendered and "[sample]" not in rendered


def test_secrets_are_redacted_by_type_and_by_key() -> None:
    model = _Secrets(
        headers={"authorization": "Bearer abc"}, token=SecretStr("s3cret"), password_hash="$2b$12$x"
    )
    out = _plain(model)
    assert out == {
        "headers": {"authorization": REDACTED},
        "token": REDACTED,
        "password_hash": REDACTED,
        "endpoint": "x:1",
        "bearer_value": "",  # an empty secret has nothing to hide
    }
    assert "s3cret" not in str(out) and "abc" not in str(out)
