"""Runs the real `otelgpu` CLI as a child process and reads its log as it goes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path


class AgentProcess:
    """`python -m otelgpu ARGS`, with its stderr collected line by line on a thread."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "otelgpu", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 20.0) -> int:
        """Waits for a log line matching `pattern` at or after line `after`; returns its index."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for i in range(after, len(self.lines)):
                    if regex.search(self.lines[i]):
                        return i
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(
            f"no line matching {pattern!r} after line {after}; output:\n{self.output[-4000:]}"
        )

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 25.0) -> int:
        """Sends `sig` and returns the exit code; fails if the agent takes over `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(
                f"agent did not exit within {timeout}s:\n{self.output[-4000:]}"
            ) from None
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def scrape(port: int) -> str:
    """The agent's /metrics on 127.0.0.1:`port`, as text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as response:
        return str(response.read().decode())


def scrape_until(port: int, needle: str, timeout: float = 20.0) -> str:
    """Scrapes until the body holds `needle` and returns that body.

    The debug exporter may log a collection before the prometheus exporter, a sibling in the same
    fan-out, has taken it in, so a log line alone does not mean the body holds it yet."""
    deadline = time.monotonic() + timeout
    body = scrape(port)
    while needle not in body:
        assert time.monotonic() < deadline, f"no {needle!r} on :{port} within {timeout} s:\n{body}"
        time.sleep(0.05)
        body = scrape(port)
    return body
