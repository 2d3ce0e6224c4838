"""The resolved configuration as YAML, secrets redacted (`otelgpu print-config`)."""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel, SecretStr

from otelgpu.component.component import Kind
from otelgpu.config.schema import AgentConfig

REDACTED = "[REDACTED]"
_PYDANTIC_SECRET = str(SecretStr("x"))  # how pydantic renders any SecretStr: "**********"
# Values under keys like these are secrets even when their type does not say so.
_SECRET_KEY_RE = re.compile(
    r"(password|passwd|secret|token|credential|api_?key|authorization)", re.I
)


def render(config: AgentConfig) -> str:
    """YAML of every component's effective options (defaults included) and the service."""
    doc: dict[str, Any] = {}
    for kind in Kind:
        components = config.components[kind]
        if components:
            doc[kind.section] = {str(cid): _plain(model) for cid, model in components.items()}
    doc["service"] = {
        "extensions": [str(c) for c in config.extensions],
        "pipelines": {
            str(pid): {
                "receivers": [str(c) for c in p.receivers],
                "processors": [str(c) for c in p.processors],
                "exporters": [str(c) for c in p.exporters],
            }
            for pid, p in config.pipelines.items()
        },
        "telemetry": _plain(config.telemetry),
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _plain(value: Any, key: str = "") -> Any:
    """JSON-mode dump (durations as `10s`), then redaction by type and by key name."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value == _PYDANTIC_SECRET:
        return REDACTED
    if key and _SECRET_KEY_RE.search(key) and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, dict):
        redact_all = key == "headers"
        return {str(k): REDACTED if redact_all else _plain(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
