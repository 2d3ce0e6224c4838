"""P3's census: where a running agent's memory goes, by who allocated it and by who holds it.

`bench/p3_rss.py --census` starts the agent through `BOOT` (below) instead of `-m otelgpu`:
tracemalloc traces every allocation from the first import (25 frames each), and on SIGUSR2 the
agent writes two files next to the path in `P3_CENSUS_OUT`:

- `<out>.snap`: the tracemalloc snapshot, which `allocations` groups by component (the
  innermost otelgpu frame's package: `otelgpu/exporters/prometheus`, ...), with module
  imports apart (any frame in importlib: one line here; bench/p3_imports.py's census, which
  `--census` prints too, gives each module's own share) and what no otelgpu frame allocated
  apart;
- `<out>.json`: what each running component *holds*: the bytes reachable from it
  (`sys.getsizeof` over `gc.get_referents`, stopping at modules, classes, functions, the
  service, the event loop and other components), with its biggest attributes two levels
  down, each also with its marginal bytes (what the holder would hold less without it:
  objects it shares with a sibling are not counted). Reachable bytes count Python objects only: what a C library keeps (gRPC core,
  OpenSSL, upb) shows in RSS and not here.

Allocation and holding differ: the strings a receiver builds and the Prometheus exporter keeps
are allocated by the receiver and held by the exporter. tracemalloc itself costs RSS (about
twice the traced heap), so the census run's RSS is not a P3 figure.
"""

from __future__ import annotations

import json
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

MIB = 1 << 20

# Run by the agent's interpreter as `python -S -X tracemalloc=25 -c BOOT run -c <file>`.
BOOT = r"""
import gc, json, os, signal, sys, tracemalloc, types

OUT = os.environ["P3_CENSUS_OUT"]
SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType,
        types.MethodType, types.FrameType)


def reach(root, stop):
    seen, todo, total = set(stop), [root], 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, SKIP):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def parts(obj, stop, depth):
    # Each attribute's bytes on its own, and its marginal bytes: what the object would hold
    # less without it (objects shared with a sibling attribute are not marginal to either).
    out = {}
    fields = getattr(obj, "__dict__", None) or {
        s: getattr(obj, s) for s in getattr(type(obj), "__slots__", ()) if hasattr(obj, s)
    }
    if isinstance(obj, dict) and len(obj) < 100:
        fields = {str(k)[:30]: v for k, v in obj.items()}
    stop = stop | {id(obj)}
    everything = reach(list(fields.values()), stop) if len(fields) <= 12 else 0
    for name, value in fields.items():
        size = reach(value, stop)
        if size < 64 * 1024:
            continue
        entry = {"bytes": size, "type": type(value).__name__}
        if len(fields) <= 12:  # one walk of the siblings per field: only for small objects
            others = [v for n, v in fields.items() if n != name]
            entry["marginal"] = everything - reach(others, stop)
        if isinstance(value, (dict, list, tuple)):
            entry["len"] = len(value)
        if depth > 1:
            entry["parts"] = parts(value, stop, depth - 1)
        out[name] = entry
    return out


def held():
    from otelgpu.service.service import Service
    gc.unfreeze()  # frozen objects are not listed by gc.get_objects
    services = [o for o in gc.get_objects() if isinstance(o, Service)]
    out = []
    for service in services:
        components = [c for _, _, c in service._started]
        import asyncio
        loop = asyncio._get_running_loop()  # the signal handler runs inside the loop's thread
        stop = {id(service), id(service.telemetry), id(service.graph), id(loop)}
        stop |= {id(c) for c in components}
        for label, kind, component in service._started:
            others = stop - {id(component)}
            out.append({"label": label, "kind": kind, "bytes": reach(component, others),
                        "parts": parts(component, others, 3)})
        out.append({"label": "self-telemetry", "kind": "service",
                    "bytes": reach(service.telemetry, stop - {id(service.telemetry)}),
                    "parts": parts(service.telemetry, stop - {id(service.telemetry)}, 2)})
    return out


def dump(signum, frame):
    tracemalloc.take_snapshot().dump(OUT + ".snap")
    with open(OUT + ".json", "w") as f:
        json.dump(held(), f)
    gc.freeze()
    open(OUT + ".done", "w").close()


signal.signal(signal.SIGUSR2, dump)
from otelgpu.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def component_of(filename: str) -> str | None:
    """`otelgpu/exporters/prometheus` for a file under it; None outside the package."""
    marker = "/otelgpu/"
    at = filename.rfind(marker)
    if at < 0:
        return None
    parts = filename[at + 1 :].split("/")
    # otelgpu/<kind>/<component>/file.py, or otelgpu/<file>.py, otelgpu/<pkg>/file.py
    depth = 3 if parts[1] in ("exporters", "processors", "receivers", "extensions") else 2
    return "/".join(parts[:depth]).removesuffix(".py")


def allocations(path: Path) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(bytes by group, bytes by innermost otelgpu file:line, bytes by innermost frame outside
    otelgpu for the 'no otelgpu frame' group) of a dumped snapshot."""
    snapshot = tracemalloc.Snapshot.load(str(path))
    groups: dict[str, int] = defaultdict(int)
    lines: dict[str, int] = defaultdict(int)
    foreign: dict[str, int] = defaultdict(int)
    for trace in snapshot.traces:
        frames = list(reversed(trace.traceback))  # innermost first (tracemalloc: oldest first)
        names = [f.filename for f in frames]
        if any("importlib" in n for n in names):
            groups["imports (module code, classes, constants)"] += trace.size
            continue
        for frame in frames:
            component = component_of(frame.filename)
            if component is not None:
                groups[component] += trace.size
                short = frame.filename[frame.filename.rfind("/otelgpu/") + 1 :]
                key = f"{short}:{frame.lineno}"
                if frame is not frames[0]:  # allocated by a library this line called
                    key += f" <- {_short(frames[0])}"
                lines[key] += trace.size
                break
        else:
            groups["no otelgpu frame (asyncio, grpc, threads)"] += trace.size
            foreign[_short(frames[0])] += trace.size
    return dict(groups), dict(lines), dict(foreign)


def _short(frame: tracemalloc.Frame) -> str:
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


def _top(table: dict[str, int], n: int) -> list[tuple[str, int]]:
    return sorted(table.items(), key=lambda kv: -kv[1])[:n]


def _print_parts(parts: dict[str, Any], indent: int) -> None:
    for name, entry in sorted(parts.items(), key=lambda kv: -kv[1]["bytes"])[:8]:
        marginal = f"{entry['marginal'] / MIB:6.2f}" if "marginal" in entry else "     -"
        size = f"{entry['bytes'] / MIB:6.2f} MiB (marginal {marginal})"
        length = f" len {entry['len']}" if "len" in entry else ""
        print(f"{' ' * indent}{name:<{40 - indent}} {size}  {entry['type']}{length}")
        _print_parts(entry.get("parts", {}), indent + 2)


def print_census(label: str, out: Path, series: int, top: int = 25) -> None:
    """Prints both views of one run's census."""
    groups, lines, foreign = allocations(out.with_suffix(".snap"))
    total = sum(groups.values())
    print(f"census of the {label} run ({series} series): traced heap {total / MIB:.1f} MiB")
    print("  allocated by (innermost otelgpu frame's component):")
    for name, size in _top(groups, 30):
        print(f"    {name:<52} {size / MIB:6.2f} MiB")
    print(f"  top {top} otelgpu lines (data, imports excluded):")
    for name, size in _top(lines, top):
        print(f"    {size / MIB:6.2f} MiB  {name}")
    print("  top lines with no otelgpu frame:")
    for name, size in _top(foreign, 8):
        print(f"    {name:<52} {size / MIB:6.2f} MiB")
    print("  held by (Python objects reachable from each component):")
    for entry in json.loads(out.with_suffix(".json").read_text()):
        per = f"{entry['bytes'] / max(series, 1):.0f} B/series"
        print(f"    {entry['label']:<38} {entry['bytes'] / MIB:6.2f} MiB  ({per})")
        _print_parts(entry["parts"], 6)
