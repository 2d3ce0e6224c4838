"""Turns pydantic validation errors into located, human config issues.

Pydantic's texts are generic ("Extra inputs are not permitted"); the models' own field
types are known here, so the messages can say what was expected and which keys are valid.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.functional_validators import BeforeValidator

from otelgpu.component.errors import Issue
from otelgpu.config.positions import Path, Positions
from otelgpu.config.suggest import did_you_mean
from otelgpu.config.types import parse_duration, parse_size

_TYPE_ERRORS = {
    "string_type",
    "int_type",
    "int_parsing",
    "int_from_float",
    "float_type",
    "float_parsing",
    "bool_type",
    "bool_parsing",
    "list_type",
    "dict_type",
    "model_type",
    "model_attributes_type",
    "tuple_type",
    "set_type",
    "none_required",
    "string_sub_type",
    "union_type",  # a value that fits no member of a union (see _without_union_members)
}
_BOUNDS = {
    "greater_than": "greater than",
    "greater_than_equal": "at least",
    "less_than": "less than",
    "less_than_equal": "at most",
}


def issues_from(
    exc: ValidationError, model: type[BaseModel], prefix: Path, positions: Positions
) -> list[Issue]:
    """One issue per pydantic error, located at the offending key or value."""
    issues = []
    for err, loc in _without_union_members(exc.errors(include_url=False), model):
        path = (*prefix, *loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            owner = _type_at(model, loc[:-1])
            names = _field_names(owner) if owner else []
            hint = did_you_mean(str(loc[-1]), names)
            valid = ", ".join(names)
            message = f"unknown key{hint} (valid keys: {valid})" if valid else "unknown key"
            mark = positions.key(path)
        elif kind == "missing":
            message = "required key is missing"
            mark = positions.value(path[:-1])
        else:
            message = _describe_error(err, _type_at(model, loc))
            mark = positions.value(path)
        issues.append(Issue(mark.file, mark.line, mark.column, path, message))
    return issues


def _without_union_members(errors: list[Any], model: type[BaseModel]) -> list[tuple[Any, Path]]:
    """Pydantic reports a value that fits no member of a union once per member, each under
    the member's name (`gpus::int`, `gpus::list[...]`). Those names are not keys: they are
    dropped, at any depth. A union's errors become one "expected A or B" at the union's value
    unless some member's errors go deeper (the member the writer meant), which are then the
    only ones kept; a union inside that member is judged the same way."""
    cleaned = [(err, *_clean_loc(tuple(err["loc"]), model)) for err in errors]
    deeper = {u for _, loc, unions in cleaned for u in unions if len(loc) > len(u)}
    out: list[tuple[Any, Path]] = []
    reported: set[Path] = set()
    for err, loc, unions in cleaned:
        if any(u in deeper and len(loc) <= len(u) for u in unions):
            continue  # a member the writer did not mean
        at = next((u for u in reversed(unions) if len(loc) == len(u)), None)
        if at is not None:  # the value fits no member of the union it is the value of
            if at in reported:
                continue
            reported.add(at)
            err = {**err, "type": "union_type"}
        out.append((err, loc))
    return out


def _clean_loc(loc: tuple[Any, ...], model: type[BaseModel]) -> tuple[Path, tuple[Path, ...]]:
    """`loc` without union member names, and where each union it passed through is."""
    out: list[Any] = []
    unions: list[Path] = []
    member = False  # the part just dropped named a union member: the next is inside it
    for part in loc:
        if isinstance(part, str) and part.startswith("~"):  # our tagged unions' tags
            member = True  # what follows is inside the member the tag names, never a name
            continue
        if not member:
            tp = _strip(_type_at(model, tuple(out)))
            if _is_union(tp) and isinstance(part, str) and _model_member(tp, part) is None:
                unions.append(tuple(out))
                member = True
                continue
        member = False
        out.append(part)
    return tuple(out), tuple(unions)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _describe_error(err: Any, tp: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind in ("literal_error", "enum") or (kind == "union_type" and _choices(tp)):
        choices = _choices(tp) or ctx.get("expected", "")
        return f'must be one of: {choices} (got "{err["input"]}"){_quote_hint(err["input"])}'
    if kind in _TYPE_ERRORS:
        if tp is None:
            return str(err["msg"])
        hint = _quote_hint(err["input"]) if kind in ("string_type", "union_type") else ""
        return f"expected {describe(tp)}{hint}"
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()), "")
        if _validator_of(tp) is parse_duration:
            return (
                "must be a positive duration" if bound == 0 else f"must be {_BOUNDS[kind]} {bound}s"
            )
        return f"must be {_BOUNDS[kind]} {bound}"
    text = str(err["msg"])
    return text[:1].lower() + text[1:]


def _quote_hint(value: Any) -> str:
    """For a value YAML read as a boolean or a number (YAML 1.1 reads on, off, yes, no as
    booleans and 0123 as an octal number): how to keep it as written."""
    if isinstance(value, bool | int | float):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        return f'; YAML read the value as {shown}: quote it to keep it as written ("on", "0123")'
    return ""


def describe(tp: Any) -> str:
    """`list[str]` → "a list of strings"; a duration → "a duration such as 10s"; ..."""
    validator = _validator_of(tp)
    if validator is parse_duration:
        return "a duration such as 500ms, 10s or 5m"
    if validator is parse_size:
        return "a size such as 512KiB or 64MiB"
    tp = _strip(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple, set, frozenset):
        return f"a list of {_plural(describe(args[0]))}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in args if a is not type(None))
    if origin is Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return f"one of: {_choices(tp)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping of options ({', '.join(_field_names(tp))})"
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean (true or false)",
    }.get(tp, f"a {getattr(tp, '__name__', tp)}")


def _plural(text: str) -> str:
    for article in ("a ", "an "):
        if text.startswith(article):
            noun, _, rest = text[len(article) :].partition(" ")
            return f"{noun}s{' ' + rest if rest else ''}"
    return text


def _choices(tp: Any) -> str:
    """The values a Literal, an Enum or a union made only of those allows ("" when `tp` is
    none of these); the empty string shows as `""`."""
    tp = _strip(tp)
    if typing.get_origin(tp) is Literal:
        values = list(typing.get_args(tp))
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
    elif _is_union(tp):
        parts = [_choices(member) for member in typing.get_args(tp)]
        return ", ".join(parts) if all(parts) else ""
    else:
        return ""
    return ", ".join('""' if value == "" else str(value) for value in values)


def _strip(tp: Any) -> Any:
    """Removes Annotated and Optional wrappers."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _strip(rest[0])
    return tp


def _validator_of(tp: Any) -> Any:
    metadata: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        metadata.extend(tp.__metadata__)
        tp = typing.get_args(tp)[0]
    for item in metadata:
        if isinstance(item, BeforeValidator):
            return item.func
    return None


def _field_names(model: Any) -> list[str]:
    """The keys `model` allows; those of a union are the keys of its members that are
    models (a tagged union's mapping form)."""
    model = _strip(model)
    if _is_union(model):
        return sorted({name for member in typing.get_args(model) for name in _field_names(member)})
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def _type_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The declared type at `loc` inside `model` (None when it cannot be followed)."""
    tp: Any = model
    for part in loc:
        tp = _strip(tp)
        tp = _model_member(tp, str(part)) or _list_member(tp, part) or tp
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(str(part))
            if field is None:
                return None
            tp = field.annotation
            if field.metadata:
                tp = typing.Annotated[(tp, *field.metadata)]
            continue
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple, set, frozenset) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return None
    return tp


def _model_member(tp: Any, name: str) -> Any:
    """The member of a union that is a model with field `name` (None when there is none)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    for member in typing.get_args(tp):
        member = _strip(member)
        if (
            isinstance(member, type)
            and issubclass(member, BaseModel)
            and name in member.model_fields
        ):
            return member
    return None


def _list_member(tp: Any, part: Any) -> Any:
    """The list member of a union, when `part` indexes a list (None otherwise)."""
    if not (_is_union(tp) and isinstance(part, int)):
        return None
    members = [_strip(m) for m in typing.get_args(tp)]
    return next((m for m in members if typing.get_origin(m) in (list, tuple)), None)
