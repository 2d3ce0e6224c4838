"""A board's NVML answers, recorded once on real silicon and replayed without a GPU.

`RecordingNvml` wraps any `NvmlClient` and notes each call: the method, the device it asked
(by name: `gpu0`, `gpu0/mig1.0`), its other arguments, and the answer or NVML's error code.
`ProfileNvml` is an `NvmlClient` that answers from such a record, so the receiver's real code
meets the real shapes, units and error codes of a board that CI never sees. A recorded call
answers its recorded values in turn (the last one repeating); a call the record never saw
raises `NvmlError(ERROR_UNKNOWN)` and is noted in `ProfileNvml.unrecorded`, so a change that
makes NVML calls the board never answered shows up in a test.

The two batched calls are answered per ID when the record never saw the batch as asked:
`nvmlDeviceGetFieldValues` gives each field its own return code and value, and
`nvmlGpmMetricsGet` each metric its own, so a batch of other IDs (the default metric set reads
11 of the 28 fields the every-metric record asked for) is answered field by field from the
board's answers to those fields in any batch, each field's answers in turn. Such a call is
noted in `ProfileNvml.composed`; an ID the board was never asked is answered
`ERROR_UNKNOWN` in its entry and noted in `unrecorded`.

The record is JSON (`boards/*.json`; docs/hardware/ says how each was taken):
{"board", "driver", "phases": {PHASE: [ANSWER]}}, each ANSWER {"call", "device", "args",
"value" | "error"}. Values are tagged where JSON would lose their type: {"tuple": [...]},
{"handle": NAME}, {"opaque": KIND}, {"type": CLASS, "fields": {...}} for the Protocol's
dataclasses.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import FieldValue, MigInstance, NvmlError, ProcessUtilization

_TYPES: dict[str, Any] = {
    cls.__name__: cls for cls in (FieldValue, MigInstance, ProcessUtilization)
}
# Arguments (counted after the device) that change every call without changing what is asked:
# left out of the key.
_UNKEYED_ARGS: dict[str, tuple[int, ...]] = {
    "process_utilization": (0,),  # since_us
    "gpm_sample": (0,),  # the sample buffer
    "gpm_mig_sample": (1,),
    "gpm_metrics": (0, 1),  # the two sample buffers
    "register_xid_events": (0,),  # the event set
    "event_wait": (0, 1),  # the event set and the timeout
    "gpm_sample_free": (0,),
    "event_set_free": (0,),
}
# Calls that take no device.
_NO_DEVICE = frozenset(
    {
        "init",
        "shutdown",
        "driver_version",
        "device_count",
        "device_handle",
        "gpm_sample_alloc",
        "gpm_sample_free",
        "gpm_metrics",
        "event_set_create",
        "event_set_free",
        "event_wait",
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class ProfileHandle:
    """A replayed device handle: the device's name in the record."""

    name: str


def _split(
    call: str, args: Sequence[Any], name_of: Callable[[Any], str | None]
) -> tuple[str, Sequence[Any]]:
    """A call's device by name ("" for a call that takes none, "?" for a handle without a
    name) and its other arguments."""
    if call in _NO_DEVICE or not args:
        return "", args
    return name_of(args[0]) or "?", args[1:]


def _encode(value: Any, name_of: Callable[[Any], str | None]) -> Any:
    """`value` as the record keeps it: handles by name (`name_of`, None when not a handle),
    tuples and the Protocol's dataclasses tagged, anything else unreadable as `opaque`."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, name_of) for v in value]}
    if isinstance(value, list):
        return [_encode(v, name_of) for v in value]
    if dataclasses.is_dataclass(value) and type(value).__name__ in _TYPES:
        fields = dataclasses.fields(value)
        encoded = {f.name: _encode(getattr(value, f.name), name_of) for f in fields}
        return {"type": type(value).__name__, "fields": encoded}
    name = name_of(value)
    return {"handle": name} if name is not None else {"opaque": repr(value)}


def _key(call: str, device: str, args: Sequence[Any]) -> str:
    skip = _UNKEYED_ARGS.get(call, ())
    kept = [a for i, a in enumerate(args) if i not in skip]
    return json.dumps([call, device, kept], sort_keys=True)


class RecordingNvml:
    """An `NvmlClient` that passes each call to `client` and notes it in `answers`.

    `phase` names the conditions of what is recorded now (`idle`, `load`); set it between
    calls. Device handles are named as they are handed out, so MIG devices and the handle
    an XID event names are recorded by name too.
    """

    def __init__(self, client: nvml.NvmlClient) -> None:
        self.client = client
        self.phase = "idle"
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self._names: dict[Any, str] = {}
        self._lock = threading.Lock()

    def name_of(self, handle: Any) -> str:
        return self._names.get(_identity(handle), "?")

    def _note(self, call: str, args: tuple[Any, ...], answer: dict[str, Any]) -> None:
        device, rest = _split(call, args, self.name_of)
        skip = _UNKEYED_ARGS.get(call, ())
        entry = {
            "call": call,
            "device": device,
            "args": [self._encode(a) if i not in skip else None for i, a in enumerate(rest)],
            **answer,
        }
        with self._lock:
            self.answers.setdefault(self.phase, []).append(entry)

    def __getattr__(self, call: str) -> Any:
        method = getattr(self.client, call)

        def recorded(*args: Any) -> Any:
            try:
                value = method(*args)
            except NvmlError as exc:
                self._note(call, args, {"error": exc.code, "message": str(exc)})
                raise
            self._learn(call, args, value)
            self._note(call, args, {"value": self._encode(value)})
            return value

        return recorded

    def end_event_wait(self, event_set: Any) -> None:
        """Passed on, not recorded: it asks the driver nothing (a replay answers it itself)."""
        self.client.end_event_wait(event_set)

    def _learn(self, call: str, args: tuple[Any, ...], value: Any) -> None:
        """Names the handles an answer hands out."""
        if call == "device_handle":
            self._names[_identity(value)] = f"gpu{args[0]}"
        elif call == "mig_instances":
            parent = self.name_of(args[0])
            for mig in value:
                name = f"{parent}/mig{mig.gpu_instance_id}.{mig.compute_instance_id}"
                self._names[_identity(mig.handle)] = name

    def _encode(self, value: Any) -> Any:
        return _encode(value, lambda handle: self._names.get(_identity(handle)))

    def record(self, **about: Any) -> dict[str, Any]:
        """The record so far, with `about` (board, driver, ...) at its head."""
        with self._lock:
            return {**about, "phases": {k: list(v) for k, v in self.answers.items()}}


def _identity(handle: Any) -> Any:
    """What tells handles apart: a ctypes pointer's address, else the object itself."""
    try:
        return ("ptr", ctypes.cast(handle, ctypes.c_void_p).value)
    except (TypeError, ctypes.ArgumentError):
        pass
    try:
        hash(handle)
    except TypeError:
        return ("id", id(handle))
    return handle


# The batched calls, answered per ID when the batch as asked was never recorded (their IDs
# are their last argument).
_PER_ID = frozenset({"field_values", "gpm_metrics"})


class ProfileNvml:
    """An `NvmlClient` that answers from a recorded phase of a board (see the module doc).

    `quiet_wait` caps how long a recorded event wait that saw no event waits (seconds; None:
    the timeout asked). With `events_once`, each recorded event is answered once: past the
    recorded waits, every wait times out (an XID recorded last is not counted again and again)."""

    def __init__(
        self,
        record: dict[str, Any],
        phase: str = "idle",
        *,
        quiet_wait: float | None = 0.05,
        events_once: bool = False,
    ) -> None:
        self.board = str(record.get("board", ""))
        self.driver = str(record.get("driver", ""))
        self._answers: dict[str, list[dict[str, Any]]] = {}
        # (call, device, id) → the answers for that one ID, in the order recorded
        self._per_id: dict[tuple[str, str, int], list[Any]] = {}
        for entry in record["phases"][phase]:
            key = _key(entry["call"], entry["device"], entry["args"])
            self._answers.setdefault(key, []).append(entry)
            if entry["call"] in _PER_ID and "value" in entry:
                self._index_per_id(entry)
        self._turn: dict[Any, int] = {}
        self._lock = threading.Lock()
        self.unrecorded: set[str] = set()
        self.composed: set[str] = set()
        self.calls: dict[str, int] = {}
        self._quiet = threading.Event()  # set by `close`: a wait that only times out until then
        self._quiet_wait = quiet_wait
        self._events_once = events_once

    def _index_per_id(self, entry: dict[str, Any]) -> None:
        call, device = entry["call"], entry["device"]
        if call == "field_values":
            for answer in entry["value"]:
                field = (call, device, int(answer["fields"]["field_id"]))
                self._per_id.setdefault(field, []).append(answer)
        else:  # gpm_metrics: (code, value) per metric ID, in the order the IDs were asked
            for metric_id, answer in zip(entry["args"][-1], entry["value"], strict=True):
                self._per_id.setdefault((call, device, int(metric_id)), []).append(answer)

    @classmethod
    def load(cls, path: str | Path, phase: str = "idle") -> ProfileNvml:
        return cls(json.loads(Path(path).read_text()), phase)

    def _answer(self, call: str, args: tuple[Any, ...]) -> Any:
        device, rest = _split(call, args, _handle_name)
        key = _key(call, device, [_encode(a, _handle_name) for a in rest])
        with self._lock:
            self.calls[call] = self.calls.get(call, 0) + 1
            recorded = self._answers.get(key)
            if not recorded and call in _PER_ID:
                self.composed.add(key)
                return self._compose(call, device, list(rest[-1]))
            if not recorded:
                self.unrecorded.add(key)
                raise NvmlError(nvml.ERROR_UNKNOWN, f"not in the record: {key}")
            turn = self._turn.get(key, 0)
            self._turn[key] = turn + 1
            entry = recorded[min(turn, len(recorded) - 1)]
        if "error" in entry:
            raise NvmlError(int(entry["error"]), str(entry.get("message", "")))
        return _decode(entry["value"])

    def _compose(self, call: str, device: str, ids: list[int]) -> list[Any]:
        """A batch the record never saw as asked, answered ID by ID (under the lock)."""
        answers = []
        for field_id in ids:
            key = (call, device, int(field_id))
            recorded = self._per_id.get(key)
            if not recorded:
                self.unrecorded.add(json.dumps([call, device, int(field_id)]))
                answers.append(_unknown(call, int(field_id)))
                continue
            turn = self._turn.get(key, 0)
            self._turn[key] = turn + 1
            answers.append(_decode(recorded[min(turn, len(recorded) - 1)]))
        return answers

    def __getattr__(self, call: str) -> Any:
        if call.startswith("_"):
            raise AttributeError(call)

        def answered(*args: Any) -> Any:
            return self._answer(call, args)

        return answered

    # GPM sample buffers and event sets are the caller's to hold: fresh objects, not replayed.
    def gpm_sample_alloc(self) -> Any:
        self._answer("gpm_sample_alloc", ())
        return {"sample": True}

    def event_set_create(self) -> Any:
        self._answer("event_set_create", ())
        return {"event_set": True}

    def event_wait(self, event_set: Any, timeout_ms: int) -> Any:
        try:
            if self._events_once and self._events_spent():
                raise NvmlError(nvml.ERROR_TIMEOUT, "no event (the recorded ones were answered)")
            return self._answer("event_wait", (event_set, timeout_ms))
        except NvmlError as exc:
            if exc.code == nvml.ERROR_TIMEOUT:  # a recorded wait that saw no event: wait too,
                # so the watcher's loop does not spin
                wait = timeout_ms / 1000
                self._quiet.wait(wait if self._quiet_wait is None else min(wait, self._quiet_wait))
            raise

    def _events_spent(self) -> bool:
        key = _key("event_wait", "", [])
        with self._lock:
            return self._turn.get(key, 0) >= len(self._answers.get(key, ()))

    def end_event_wait(self, event_set: Any) -> None:
        """Ends the event waits now (the watcher is stopping); not a recorded call."""
        self._quiet.set()

    def close(self) -> None:
        """Ends any event wait now (the replayed board is being let go)."""
        self._quiet.set()


def _unknown(call: str, field_id: int) -> Any:
    """One entry of a batched answer for an ID the board was never asked."""
    if call == "field_values":
        return FieldValue(field_id, nvml.ERROR_UNKNOWN, 0)
    return (nvml.ERROR_UNKNOWN, 0.0)


def _handle_name(handle: Any) -> str | None:
    return handle.name if isinstance(handle, ProfileHandle) else None


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "handle" in value:
        return ProfileHandle(value["handle"])
    if "type" in value:
        return _TYPES[value["type"]](**{k: _decode(v) for k, v in value["fields"].items()})
    return {"opaque": value.get("opaque")}
