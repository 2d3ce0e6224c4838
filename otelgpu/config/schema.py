"""Stages 2 and 3 of validation: each component's typed config, then the service's references.

Every problem is collected and raised together as one ConfigError, compiler style.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError, Issue
from otelgpu.component.registry import Registry
from otelgpu.config.collector_compat import (
    NO_OP_PROCESSORS,
    collector_keys,
    deprecation,
    factory_for,
)
from otelgpu.config.lint import (
    expiring_before_collection,
    port_conflicts,
    warn_include_everything,
    warn_secret_like_includes,
    warn_what_cannot_be_done_as_asked,
)
from otelgpu.config.loader import RawConfig, sort_issues
from otelgpu.config.messages import issues_from
from otelgpu.config.pipeline import Pipeline
from otelgpu.config.positions import Path, Positions
from otelgpu.config.service_section import PipelineSpec, ServiceConfig, TelemetryConfig
from otelgpu.config.telemetry_readers import reader_endpoints
from otelgpu.config.types import StrictModel

_log = logging.getLogger("otelgpu.config")


_SECTIONS = ("receivers", "processors", "exporters", "extensions", "service")
_SIGNALS = ("metrics",)


@dataclass
class AgentConfig:
    """The whole validated configuration: typed component configs and the wiring."""

    components: dict[Kind, dict[ComponentID, BaseModel]]
    pipelines: dict[ComponentID, Pipeline]
    extensions: tuple[ComponentID, ...]
    telemetry: TelemetryConfig
    telemetry_exporters: tuple[ComponentID, ...] = field(default=())


def validate(raw: RawConfig, registry: Registry) -> AgentConfig:
    """Checks every component and reference; raises ConfigError with all issues at once
    (those `load` found inside the files too), sorted by file, line and column."""
    issues: list[Issue] = []
    data, pos = raw.data, raw.positions
    for key in data:
        if key not in _SECTIONS:
            _issue(
                issues, pos, (key,), f"unknown section (valid: {', '.join(_SECTIONS)})", at_key=True
            )
    components = {
        kind: _components(kind, data.get(kind.section), registry, pos, issues) for kind in Kind
    }
    config = AgentConfig(
        components=components, pipelines={}, extensions=(), telemetry=TelemetryConfig()
    )
    declared = {kind: _declared(data.get(kind.section)) for kind in Kind}
    _wire(config, declared, data.get("service"), pos, issues)
    started = _started(config)
    issues += port_conflicts(started, pos, reader_endpoints(config.telemetry.metrics.readers))
    issues += expiring_before_collection(
        config.pipelines.values(),
        components[Kind.RECEIVER],
        components[Kind.EXPORTER],
        pos,
    )
    if issues or raw.issues:
        own = _not_echoes(issues, raw.damaged)
        raise ConfigError(sort_issues([*raw.issues, *own], raw.sources))
    _warn_unused(config, pos)
    warn_include_everything(started, pos)
    warn_secret_like_includes(started, pos)
    warn_what_cannot_be_done_as_asked(started, pos)
    return config


def _started(config: AgentConfig) -> list[tuple[Kind, ComponentID, BaseModel]]:
    """The components `run` would start, in the order they are configured."""
    used = {(Kind.EXTENSION, c) for c in config.extensions}
    used.update((Kind.EXPORTER, c) for c in config.telemetry_exporters)
    for p in config.pipelines.values():
        used.update((Kind.RECEIVER, c) for c in p.receivers)
        used.update((Kind.PROCESSOR, c) for c in p.processors)
        used.update((Kind.EXPORTER, c) for c in p.exporters)
    return [
        (kind, cid, model)
        for kind, components in config.components.items()
        for cid, model in components.items()
        if (kind, cid) in used
    ]


def _not_echoes(issues: list[Issue], damaged: set[Path]) -> list[Issue]:
    """Drops an issue about a value `load` already reported and replaced (an unset variable
    leaves an empty string behind, which is not a second mistake)."""
    return [i for i in issues if not any(i.path[:n] in damaged for n in range(len(i.path) + 1))]


def _components(
    kind: Kind, section: Any, registry: Registry, pos: Positions, issues: list[Issue]
) -> dict[ComponentID, BaseModel]:
    out: dict[ComponentID, BaseModel] = {}
    if section is None:
        return out
    if not isinstance(section, dict):
        _issue(
            issues, pos, (kind.section,), f"expected a mapping of {kind.value} ids to their options"
        )
        return out
    for key, options in section.items():
        path = (kind.section, key)
        try:
            cid = ComponentID.parse(key)
            if kind is Kind.PROCESSOR and cid.type in NO_OP_PROCESSORS:
                _warn(pos, path, NO_OP_PROCESSORS[cid.type])
                continue
            factory = factory_for(registry, kind, cid)
        except (ValueError, KeyError) as exc:
            _issue(issues, pos, path, str(exc.args[0]), at_key=True)
            continue
        deprecated = deprecation(kind, cid)
        if deprecated:
            _warn(pos, path, deprecated)
        options, findings = collector_keys(kind, factory.type, options)
        for finding in findings:
            at = (*path, *finding.path)
            if finding.refused:
                _issue(issues, pos, at, finding.answer, at_key=finding.path[-1] != "action")
            else:
                _warn(pos, at, finding.answer)
        model = _model(factory.config_type, options, path, pos, issues)
        if model is not None and not any(f.refused for f in findings):
            out[cid] = model
    return out


def _model(
    model: type[BaseModel], options: Any, path: Path, pos: Positions, issues: list[Issue]
) -> Any:
    if options is None:
        options = {}
    if not isinstance(options, dict):
        _issue(issues, pos, path, "expected a mapping of options (or nothing, for the defaults)")
        return None
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        issues.extend(issues_from(exc, model, path, pos))
        return None


def _declared(section: Any) -> set[ComponentID] | None:
    """IDs present in a section, valid or not: a reference to one whose options are wrong
    is not a second error (the options were already reported). None when the section itself
    is malformed, so references to it cannot be checked."""
    if section is not None and not isinstance(section, dict):
        return None
    out = set()
    for key in section or ():
        try:
            out.add(ComponentID.parse(str(key)))
        except ValueError:
            continue
    return out


def _wire(
    config: AgentConfig,
    declared: dict[Kind, set[ComponentID] | None],
    service: Any,
    pos: Positions,
    issues: list[Issue],
) -> None:
    """Validates `service` part by part, so one bad part does not hide the others' errors."""
    if service is None:
        service = {}
    if not isinstance(service, dict):
        _issue(issues, pos, ("service",), "expected a mapping (extensions, pipelines, telemetry)")
        return
    for key in service:
        if key not in ServiceConfig.model_fields:
            valid = ", ".join(sorted(ServiceConfig.model_fields))
            _issue(issues, pos, ("service", key), f"unknown key (valid keys: {valid})", at_key=True)
    pipelines = service.get("pipelines")
    if not pipelines:
        _issue(issues, pos, ("service", "pipelines"), "at least one pipeline is required")
    elif not isinstance(pipelines, dict):
        _issue(issues, pos, ("service", "pipelines"), "expected a mapping of pipeline ids")
    else:
        for name, spec in pipelines.items():
            _pipeline(config, declared, str(name), spec, pos, issues)
    extensions = _model(
        _Extensions, {"extensions": service.get("extensions") or []}, ("service",), pos, issues
    )
    if extensions is not None:
        config.extensions = _refs(
            declared, Kind.EXTENSION, extensions.extensions, ("service", "extensions"), pos, issues
        )
    telemetry = _model(
        TelemetryConfig, service.get("telemetry"), ("service", "telemetry"), pos, issues
    )
    if telemetry is not None:
        config.telemetry = telemetry
        config.telemetry_exporters = _refs(
            declared,
            Kind.EXPORTER,
            telemetry.metrics.exporters,
            ("service", "telemetry", "metrics", "exporters"),
            pos,
            issues,
        )


class _Extensions(StrictModel):
    extensions: list[str]


def _pipeline(
    config: AgentConfig,
    declared: dict[Kind, set[ComponentID] | None],
    name: str,
    spec: Any,
    pos: Positions,
    issues: list[Issue],
) -> None:
    path: Path = ("service", "pipelines", name)
    try:
        pid = ComponentID.parse(name)
    except ValueError as exc:
        _issue(issues, pos, path, str(exc), at_key=True)
        return
    if pid.type not in _SIGNALS:
        valid = ", ".join(_SIGNALS)
        _issue(issues, pos, path, f'unsupported signal "{pid.type}" (valid: {valid})', at_key=True)
        return
    model = _model(PipelineSpec, spec, path, pos, issues)
    if model is None:
        return
    refs = {
        kind: _refs(
            declared, kind, getattr(model, kind.section), (*path, kind.section), pos, issues
        )
        for kind in (Kind.RECEIVER, Kind.PROCESSOR, Kind.EXPORTER)
    }
    for kind in (Kind.RECEIVER, Kind.EXPORTER):
        if not getattr(model, kind.section):
            _issue(
                issues, pos, (*path, kind.section), f"a pipeline needs at least one {kind.value}"
            )
    config.pipelines[pid] = Pipeline(
        pid, refs[Kind.RECEIVER], refs[Kind.PROCESSOR], refs[Kind.EXPORTER]
    )


def _refs(
    declared: dict[Kind, set[ComponentID] | None],
    kind: Kind,
    names: list[str],
    path: Path,
    pos: Positions,
    issues: list[Issue],
) -> tuple[ComponentID, ...]:
    out: list[ComponentID] = []
    configured = declared[kind]
    for i, name in enumerate(names):
        try:
            cid = ComponentID.parse(name)
        except ValueError as exc:
            _issue(issues, pos, (*path, i), str(exc))
            continue
        if cid in out:
            _issue(issues, pos, (*path, i), f'{kind.value} "{cid}" is listed twice')
        elif kind is Kind.PROCESSOR and cid.type in NO_OP_PROCESSORS and cid in (configured or ()):
            continue  # accepted as a no-op where it is declared (a warning says so)
        elif configured is not None and cid not in configured:
            known = ", ".join(sorted(str(c) for c in configured)) or "none"
            _issue(
                issues,
                pos,
                (*path, i),
                f'references {kind.value} "{cid}" which is not configured '
                f"(configured {kind.section}: {known})",
            )
        else:
            out.append(cid)
    return tuple(out)


def _warn_unused(config: AgentConfig, pos: Positions) -> None:
    used = {
        c for p in config.pipelines.values() for c in (*p.receivers, *p.processors, *p.exporters)
    }
    used.update(config.extensions, config.telemetry_exporters)
    for kind, components in config.components.items():
        for cid in components:
            if cid not in used:
                _warn(pos, (kind.section, str(cid)), "configured but not used by any pipeline")


def _warn(pos: Positions, path: Path, message: str) -> None:
    """A config warning, located as errors are: `file:line:col: key::path: message`."""
    mark = pos.key(path)
    _log.warning(
        "%s:%d:%d: %s: %s", mark.file, mark.line, mark.column, "::".join(map(str, path)), message
    )


def _issue(
    issues: list[Issue], pos: Positions, path: Path, message: str, *, at_key: bool = False
) -> None:
    mark = pos.key(path) if at_key else pos.value(path)
    issues.append(Issue(mark.file, mark.line, mark.column, path, message))
