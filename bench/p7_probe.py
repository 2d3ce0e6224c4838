"""P7's view inside the agent: where its CPU-bound spans and garbage collections fall in time.

`python bench/p7_probe.py OUT.json run -c pipeline.yaml` runs the agent's CLI in this
process after installing:

- a `gc.callbacks` hook: every collection's generation, start (CLOCK_MONOTONIC, which other
  processes read with `time.monotonic()` too), duration, objects collected, and the number of
  objects the collector tracked in generation 2 after each full pass (its cost grows with it);
- wrappers timing a few pipeline steps (`SPANS`): the receiver's collect, the Prometheus
  ingest and render, the gzip in the render thread, the OTLP encode.

At exit it writes them to OUT.json; the benchmark lines them up with the slow scrapes. The
hooks cost ~1 us a collection and a call: both phases pay it alike.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, attribute path) of the functions timed: where the code that calls them looks them up
SPANS = {
    "collect": ("otelgpu.receivers.nvml.collect", "Collector.collect"),
    "ingest": ("otelgpu.exporters.prometheus.translate", "Translator.ingest"),
    "render": ("otelgpu.exporters.prometheus.exporter", "render_chunks"),
    "gzip": ("otelgpu.exporters.prometheus.exporter", "_encode"),
    "otlp_encode": ("otelgpu.exporters.otlp.exporter", "encode_bytes"),
}

_gc: list[tuple[int, float, float, int, int]] = []  # generation, start, seconds, collected, gen2
_spans: list[tuple[str, float, float]] = []  # name, start, seconds
_started: list[float] = [0.0]
_census: list[float] = [0.0]
_forked: list[tuple[float, int, int]] = []  # seconds since the fork, agent RSS, child private (KiB)
_thread_ids: dict[
    int, str
] = {}  # native id: the first span seen on it (or "http")  # when generation 2 was last counted
CENSUS_EVERY = 20.0  # seconds
RENDER_NICE = 10  # otelgpu.exporters.prometheus.exporter's
SHOW_SLOWEST = 5  # busy scrapes of each kind shown with what overlapped them


def _on_gc(phase: str, info: dict[str, int]) -> None:
    now = time.monotonic()
    if phase == "start":
        _started[0] = now
        return
    generation = info["generation"]
    size = -1
    if generation == 2 and now - _census[0] >= CENSUS_EVERY:
        # After a full pass everything that survived sits in generation 2: its size is what
        # the next full pass walks (not the frozen objects). Counting them takes milliseconds
        # with the GIL held, so only now and then, and shown as a span of its own.
        _census[0] = now
        size = len(gc.get_objects(2))
        _spans.append(("probe_census", now, time.monotonic() - now))
    _gc.append((generation, _started[0], now - _started[0], info["collected"], size))


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _thread_ids.setdefault(threading.get_native_id(), name)
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            _spans.append((name, started, time.monotonic() - started))

    return wrapper


def _install_spans() -> None:
    for name, (module_name, path) in SPANS.items():
        owner: Any = importlib.import_module(module_name)
        *parents, attribute = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, attribute, _timed(name, getattr(owner, attribute)))
    from otelgpu.confighttp import listener as http_listener

    run = http_listener.Listener._run

    def named_run(self: Any, bound: Any) -> None:
        _thread_ids[threading.get_native_id()] = "http"
        run(self, bound)

    http_listener.Listener._run = named_run  # type: ignore[method-assign]


def _dump(out: Path) -> None:
    record = {
        "gc": _gc,
        "spans": _spans,
        "threshold": gc.get_threshold(),
        "frozen": gc.get_freeze_count(),
        "thread_ids": {str(k): v for k, v in _thread_ids.items()},
        "forked": _forked,
    }
    out.write_text(json.dumps(record))


def _experiment(spec: str) -> None:
    """Settings tried in A/B runs, from `P7_EXPERIMENT` (`key=value;...`): `gc=T0,T1,T2`
    (thresholds set after each start's `heap.settle`), `render_nice=N`, `switch=SECONDS`,
    `fork=SECONDS` (`_fork_a_server`)."""
    from otelgpu.confighttp import listener as http_listener
    from otelgpu.exporters.prometheus import exporter
    from otelgpu.service import heap

    items = dict(item.partition("=")[::2] for item in filter(None, spec.split(";")))
    if "alt" in items:
        _alternate(float(items.pop("alt")), items)
        return
    for key, value in items.items():
        if key == "gc":
            thresholds = tuple(int(v) for v in value.split(","))
            settle = heap.settle

            def settle_then_set(
                settle: Callable[[], int] = settle, thresholds: tuple[int, ...] = thresholds
            ) -> int:
                frozen = settle()
                gc.set_threshold(*thresholds)
                return frozen

            heap.settle = settle_then_set
        elif key == "render_nice":
            exporter.RENDER_NICE = int(value)
        elif key == "switch":
            http_listener.SWITCH_INTERVAL = float(value)
            sys.setswitchinterval(float(value))
        elif key == "fork":
            _fork_a_server(float(value))
        else:
            raise SystemExit(f"P7_EXPERIMENT: unknown setting {key!r}")


def _fork_a_server(delay: float) -> None:
    """`fork=SECONDS`: what a serving process forked from the agent would cost in memory. That
    long after start the agent forks; the child starts a `MetricsServer` (on a port of its
    own, in a thread with its own loop, as a serving process would) and then only serves,
    while the agent goes on. Every 5 s the agent records its RSS and the child's private
    memory (`Private_Clean + Private_Dirty`: the pages it no longer shares with the agent,
    which a container is charged for on top of the agent's). Each page the agent writes after
    the fork (its heap churns every cycle) is copied, and the child keeps the old one."""

    def serve_until_orphaned(parent: int) -> None:
        import asyncio

        from otelgpu.exporters.prometheus.render import EMPTY
        from otelgpu.exporters.prometheus.server import MetricsServer

        async def serve() -> None:
            server = MetricsServer(
                host="127.0.0.1", port=0, current=lambda: EMPTY, on_scrape=lambda _, __: None
            )
            await server.start()
            while os.getppid() == parent:
                await asyncio.sleep(1)

        asyncio.run(serve())

    def fork_then_watch() -> None:
        time.sleep(delay)
        parent = os.getpid()
        child = os.fork()
        if child == 0:  # only this thread lives on in the child
            thread = threading.Thread(target=serve_until_orphaned, args=(parent,), daemon=True)
            thread.start()
            thread.join()
            os._exit(0)
        atexit.register(os.kill, child, 9)
        started = time.monotonic()
        while True:
            with contextlib.suppress(OSError):
                rss = _rollup(parent)["Rss"]
                _forked.append((time.monotonic() - started, rss, _private(child)))
            time.sleep(5)

    threading.Thread(target=fork_then_watch, name="p7 fork", daemon=True).start()


def _rollup(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0])
    return fields


def _private(pid: int) -> int:
    fields = _rollup(pid)
    return fields["Private_Clean"] + fields["Private_Dirty"]


def _alternate(period: float, items: dict[str, str]) -> None:
    """`alt=SECONDS`: the settings (`switch`, `gc`, `nice` of the render thread, `main_nice` of
    the pipeline loop's thread) hold in odd slots of SECONDS of the monotonic clock (B) and
    the defaults in even ones (A), so that one run compares both under the same load (the
    benchmark splits its scrapes the same way)."""
    switch = float(items.get("switch", sys.getswitchinterval()))
    thresholds = tuple(int(v) for v in items.get("gc", "700,10,10").split(","))
    nice = int(items.get("nice", RENDER_NICE))
    main_nice = int(items.get("main_nice", 0))
    unknown = set(items) - {"switch", "gc", "nice", "main_nice", "joined"}
    if unknown:
        raise SystemExit(f"P7_EXPERIMENT: cannot alternate {sorted(unknown)}")
    if items.get("joined") == "1":
        _join_gzip_only_bodies_in_b(period)

    def toggle() -> None:
        while True:
            now = time.monotonic()
            slot = int(now // period)
            on = slot % 2 == 1
            sys.setswitchinterval(switch if on else 0.0001)
            gc.set_threshold(*(thresholds if on else (700, 10, 10)))
            for tid, role in list(_thread_ids.items()):
                if role == "gzip":  # the render thread (its nice is its own; root may lower it)
                    with contextlib.suppress(OSError):
                        os.setpriority(os.PRIO_PROCESS, tid, nice if on else RENDER_NICE)
                elif role == "main":  # the pipeline's loop: does a lower nice help HTTP?
                    with contextlib.suppress(OSError):
                        os.setpriority(os.PRIO_PROCESS, tid, main_nice if on else 0)
            time.sleep((slot + 1) * period - now + 0.0005)

    threading.Thread(target=toggle, name="p7 alternate", daemon=True).start()


def _join_gzip_only_bodies_in_b(period: float) -> None:
    """`joined=1`: in B slots a gzip-only body is joined whole, then gzipped in one call,
    instead of gzipped chunk by chunk as the exporter does (one GIL hand-over per chunk)."""
    from otelgpu.exporters.prometheus import exporter, openmetrics, render

    chunked = render.body_of_chunks

    def switched(chunks: list[bytes], series: int, plain: bool) -> render.Body:
        if plain or int(time.monotonic() // period) % 2 == 0:
            return chunked(chunks, series, plain)
        return render.Body(None, chunked(chunks, series, True).gzipped, series)

    exporter.body_of_chunks = openmetrics.body_of_chunks = switched  # type: ignore[attr-defined]


def main() -> int:
    out = Path(sys.argv[1])
    _thread_ids[threading.get_native_id()] = "main"
    _experiment(os.environ.get("P7_EXPERIMENT", ""))
    _install_spans()
    gc.callbacks.append(_on_gc)
    atexit.register(_dump, out)
    from otelgpu.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())


# --- read back by the benchmark -------------------------------------------------------------


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


def _overlaps(start: float, end: float, events: list[tuple[float, float]]) -> bool:
    return any(at < end and at + seconds > start for at, seconds in events)


def inside_report(
    probe: dict[str, Any],
    windows: list[tuple[str, float, float]],
    results: dict[str, dict[str, list[float]]],
) -> list[str]:
    """Lines: the agent's collections per phase (rate, pause p99 and max by generation, the
    size of generation 2), then, for the slowest 2 % of busy scrapes of each kind and for all
    of them, the share that overlapped a collection or a timed pipeline step."""
    lines = [f"agent gc: threshold {tuple(probe['threshold'])}, frozen {probe['frozen']} objects"]
    events: dict[str, list[tuple[float, float]]] = {}
    for phase in ("busy", "paused"):
        spans = [(b, e) for p, b, e in windows if p == phase]
        seconds = sum(e - b for b, e in spans)
        for generation in (0, 1, 2):
            pauses = [
                (at, took)
                for g, at, took, _, _ in probe["gc"]
                if g == generation and any(b <= at < e for b, e in spans)
            ]
            if phase == "busy":
                events[f"gc{generation}"] = pauses
            took_ms = [took * 1000 for _, took in pauses]
            lines.append(
                f"agent gc {phase:6} gen{generation}: {len(pauses) / seconds:6.1f}/s, pause "
                f"p99 {_p99(took_ms):6.2f} ms, max {max(took_ms, default=0):6.2f} ms"
            )
    forked = probe.get("forked") or []
    if forked:
        lines.append(
            "forked server (fork=): seconds after the fork, agent RSS / the child's private "
            "memory, MiB: "
            + ", ".join(f"{at:.0f}s {rss / 1024:.1f}/{own / 1024:.1f}" for at, rss, own in forked)
        )
    sizes = [size for g, _, _, _, size in probe["gc"] if g == 2 and size >= 0]
    if sizes:
        lines.append(f"agent gc: objects in generation 2 after a full pass: {sizes}")
    for name in {n for n, _, _ in probe["spans"]}:
        events[name] = [(at, took) for n, at, took in probe["spans"] if n == name]
    for kind in ("plain", "gzip"):
        took, asked = results["busy"][kind], results["busy"][f"{kind}_at"]
        scrapes = [(at, at + ms / 1000) for at, ms in zip(asked, took, strict=True)]
        cut = sorted(took)[int(0.98 * len(took))] if took else 0.0
        slow = [s for s, ms in zip(scrapes, took, strict=True) if ms >= cut]
        shares = []
        for name, spans in sorted(events.items()):
            hit_slow = sum(_overlaps(b, e, spans) for b, e in slow) / max(1, len(slow))
            hit_all = sum(_overlaps(b, e, spans) for b, e in scrapes) / max(1, len(scrapes))
            shares.append(f"{name} {hit_slow:.0%}/{hit_all:.0%}")
        lines.append(
            f"busy {kind:5} scrapes >= {cut:.2f} ms ({len(slow)}) overlapping, slow/all: "
            + ", ".join(shares)
        )
        for ms, (b, e) in sorted(zip(took, scrapes, strict=True), reverse=True)[:SHOW_SLOWEST]:
            seen = [
                f"{name} {took * 1000:.1f}"
                for name, spans in sorted(events.items())
                for at, took in spans
                if at < e and at + took > b
            ]
            lines.append(f"  {kind} {ms:6.2f} ms during: {', '.join(seen) or '-'}")
    return lines
