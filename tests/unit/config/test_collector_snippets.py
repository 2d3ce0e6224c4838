"""Collector YAML that users paste: snippets from the Collector's own READMEs validate, or fail
with the documented message where otelgpu deliberately differs (testdata/collector, each file
naming its source). Each snippet is merged with a small file that wires its components into a
pipeline, the way a user adds a snippet to a pipeline file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.exporters.otlp.config import OtlpExporterConfig, OtlpHttpExporterConfig
from otelgpu.service.builtins import builtin_registry

CASES = sorted((Path(__file__).parent / "testdata" / "collector").glob("*.yaml"))


def _wiring(snippet: str) -> str:
    """A pipeline using every processor and exporter the snippet declares."""
    data = yaml.safe_load(snippet) or {}
    processors = list(data.get("processors") or {})
    exporters = list(data.get("exporters") or {}) or ["debug"]
    doc = {
        "receivers": {"nvml": {"backend": "simulated"}},
        "exporters": {"debug": None} if exporters == ["debug"] else {},
        "service": {
            "pipelines": {
                "metrics": {"receivers": ["nvml"], "processors": processors, "exporters": exporters}
            }
        },
    }
    if not doc["exporters"]:
        del doc["exporters"]
    return yaml.safe_dump(doc)


def test_every_snippet_names_its_source() -> None:
    assert len(CASES) >= 10
    for case in CASES:
        assert case.read_text().startswith("# Source: https://github.com/open-telemetry/")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_collector_snippet(case: Path) -> None:
    text = case.read_text()
    expected = [
        line.removeprefix("# expect: ") for line in text.splitlines() if line.startswith("# expect")
    ]
    raw = load([(case.name, text), ("wiring.yaml", _wiring(text))], environ={})
    if not expected:
        validate(raw, builtin_registry())
        return
    with pytest.raises(ConfigError) as info:
        validate(raw, builtin_registry())
    assert str(info.value).splitlines() == expected


def test_exporter_aliases_build_our_exporters(caplog: pytest.LogCaptureFixture) -> None:
    text = (CASES[0].parent / "otlphttp_exporter_readme.yaml").read_text()
    text += (CASES[0].parent / "otlp_grpc_renamed.yaml").read_text().replace("exporters:\n", "")
    with caplog.at_level(logging.WARNING, logger="otelgpu.config"):
        config = validate(
            load([("f.yaml", text), ("wiring.yaml", _wiring(text))], environ={}),
            builtin_registry(),
        )
    exporters = config.components[Kind.EXPORTER]
    http = exporters[ComponentID.parse("otlphttp")]
    assert isinstance(http, OtlpHttpExporterConfig)
    assert http.url() == "https://example.com:4318/v1/metrics"  # a base URL, /v1/metrics added
    assert isinstance(exporters[ComponentID.parse("otlp_grpc")], OtlpExporterConfig)
    deprecations = [r.getMessage() for r in caplog.records if "deprecated alias" in r.getMessage()]
    assert deprecations == [
        'f.yaml:4:3: exporters::otlphttp: "otlphttp" is a deprecated alias (as in the '
        'Collector); use "otlp_http" instead',
        'f.yaml:6:3: exporters::otlphttp/2: "otlphttp" is a deprecated alias (as in the '
        'Collector); use "otlp_http" instead',
    ]
