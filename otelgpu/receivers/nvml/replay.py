"""The `replay` backend: a board recorded on real silicon, answered again on any machine.

A record (`profile.py` says its shape; `scripts/nvml_record` writes one) holds every NVML call
the real backend made on a board, with the board's answer or error code. `ReplayNvml` answers
the receiver from one phase of such a record, so the agent's whole pipeline runs on that
board's real shapes, units and refusals without a GPU: for demos, dashboards and CI.

The records of the boards otelgpu was measured on ship in the package (`boards/`), chosen by
name (`board: nvidia-h100`); a record of one's own is given by `path`. Each recorded call
answers its recorded values in turn, then the last one again on every later call: the figures
settle after a few cycles (counters such as the energy stop rising), as they would on a board
that stopped changing. Events are the exception: a recorded XID is answered once, then the
waits time out. A call the record never saw answers `NVML_ERROR_UNKNOWN` and is logged once,
naming it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from otelgpu.receivers.nvml import nvml
from otelgpu.receivers.nvml.nvml import NvmlError
from otelgpu.receivers.nvml.profile import ProfileNvml

BOARDS = Path(__file__).resolve().parent / "boards"
DEFAULT_BOARD = "nvidia-h100"
DEFAULT_PHASE = "load"


def shipped_boards() -> tuple[str, ...]:
    """The names of the records shipped in the package."""
    return tuple(sorted(path.stem for path in BOARDS.glob("*.json")))


def board_path(board: str) -> Path:
    """The shipped record of `board`; ValueError naming the shipped ones when there is none."""
    boards = shipped_boards()
    if board not in boards:
        raise ValueError(
            f"unknown board {board!r} (shipped: {', '.join(boards)}); "
            "give path: for a record of your own"
        )
    return BOARDS / f"{board}.json"


def read_record(path: str | Path, phase: str) -> dict[str, Any]:
    """The record at `path`, checked to hold `phase`; ValueError saying what is wrong."""
    try:
        record: Any = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read the record {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path} is not a JSON record: {exc}") from None
    phases = record.get("phases") if isinstance(record, dict) else None
    if not isinstance(phases, dict) or not all(isinstance(p, list) for p in phases.values()):
        raise ValueError(f"{path} is not an NVML record (no 'phases' of recorded calls)")
    if phase not in phases:
        raise ValueError(
            f"{path} has no phase {phase!r} (its phases: {', '.join(sorted(phases)) or 'none'})"
        )
    return dict(record)


class ReplayNvml:
    """An `NvmlClient` answering from one phase of a recorded board (see the module doc).

    Nothing is read until `init`, which reads the record (an unreadable one fails `init` with
    `ERROR_LIBRARY_NOT_FOUND`: the receiver reports itself down and retries, as for a missing
    driver) and starts its answers from the first recorded turn.
    """

    def __init__(self, path: str | Path, phase: str, logger: logging.Logger) -> None:
        self.path = Path(path)
        self.phase = phase
        self._log = logger
        self._record: dict[str, Any] | None = None
        self._profile: ProfileNvml | None = None
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    @property
    def board(self) -> str:
        """The recorded board's model ("" before `init`)."""
        return str(self._record.get("board", "")) if self._record is not None else ""

    def init(self) -> None:
        if self._record is None:
            try:
                self._record = read_record(self.path, self.phase)
            except ValueError as exc:
                raise NvmlError(nvml.ERROR_LIBRARY_NOT_FOUND, f"replay: {exc}") from None
        # An event wait that saw no event waits its full timeout, as NVML's would; a recorded
        # XID is counted once, not on every wait once the record's waits are spent.
        self._profile = ProfileNvml(self._record, self.phase, quiet_wait=None, events_once=True)
        self._call("init")

    def shutdown(self) -> None:
        profile = self._profile
        if profile is None:
            return
        profile.close()
        with contextlib.suppress(NvmlError):  # never raises, as the Protocol says
            self._call("shutdown")

    def end_event_wait(self, event_set: Any) -> None:
        profile = self._profile
        if profile is not None:
            profile.end_event_wait(event_set)

    def _call(self, call: str, *args: Any) -> Any:
        profile = self._profile
        if profile is None:
            raise NvmlError(nvml.ERROR_UNKNOWN, f"replay: {call} before init")
        try:
            return getattr(profile, call)(*args)
        finally:
            if len(profile.unrecorded) > len(self._logged):
                self._warn(profile)

    def _warn(self, profile: ProfileNvml) -> None:
        """Logs the calls the record has no answer to, each once (the receiver's thread and
        the XID thread both call)."""
        with self._lock:
            # a set difference of strings runs without releasing the GIL: a consistent copy
            new = sorted(profile.unrecorded - self._logged)
            self._logged.update(new)
        if not new:
            return
        self._log.warning(
            "replay of %s (%s): the record has no answer to %s; answered NVML_ERROR_UNKNOWN",
            self.path.name,
            self.phase,
            ", ".join(new),
        )

    def __getattr__(self, call: str) -> Any:
        if call.startswith("_"):
            raise AttributeError(call)

        def replayed(*args: Any) -> Any:
            return self._call(call, *args)

        return replayed
