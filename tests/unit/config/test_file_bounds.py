"""What the configuration names as a file (`-c FILE`, `${file:PATH}`) is read only when it is a
regular file, within a size and a time bound: a FIFO, a device or a hung mount becomes a
located config error instead of a `validate` or a SIGHUP reload that never returns."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from otelgpu.component.errors import ConfigError
from otelgpu.config import bounded_read
from otelgpu.config.bounded_read import Unreadable, read_bounded
from otelgpu.config.loader import MAX_CONFIG_FILE, load, read_files

# A guard for the defect itself (a read that never returns), not a timing: a bounded read of a
# local file answers in milliseconds.
HANG = 30.0


def returns(work: Callable[[], Any]) -> Any:
    """`work()`'s result; fails the test if it is still blocked after HANG seconds."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    if not outcome:
        pytest.fail(f"still blocked after {HANG:.0f} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "token.fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def listening_socket(tmp_path: Path) -> Any:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    yield path
    server.close()


def test_file_substitution_refuses_a_fifo_a_device_and_a_socket(
    fifo: Path, listening_socket: Path
) -> None:
    text = (
        "receivers:\n  sample:\n"
        f'    tags: ["${{file:{fifo}}}",\n'
        '           "${file:/dev/zero}",\n'
        f'           "${{file:{listening_socket}}}"]\n'
    )
    raw = returns(lambda: load([("f.yaml", text)], environ={}))
    assert [str(i) for i in raw.issues] == [
        f'f.yaml:3:12: receivers::sample::tags::0: cannot read "${{file:{fifo}}}": '
        "not a regular file (a FIFO)",
        'f.yaml:4:12: receivers::sample::tags::1: cannot read "${file:/dev/zero}": '
        "not a regular file (a character device)",
        f'f.yaml:5:12: receivers::sample::tags::2: cannot read "${{file:{listening_socket}}}": '
        "No such device or address",
    ]


def test_a_config_file_that_is_a_fifo_or_a_device_is_refused(fifo: Path) -> None:
    with pytest.raises(ConfigError) as info:
        returns(lambda: read_files([str(fifo), "file:/dev/zero"]))
    assert [str(i) for i in info.value.issues] == [
        f"{fifo}:1:1: cannot read the file: not a regular file (a FIFO)",
        "/dev/zero:1:1: cannot read the file: not a regular file (a character device)",
    ]


def test_a_config_file_larger_than_the_bound_is_refused_after_reading_only_the_bound(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_CONFIG_FILE + 1))
    edge = tmp_path / "edge.yaml"
    edge.write_bytes(b"#" * MAX_CONFIG_FILE)
    with pytest.raises(ConfigError) as info:
        read_files([str(big)])
    assert [str(i) for i in info.value.issues] == [
        f"{big}:1:1: cannot read the file: larger than 4 MiB"
    ]
    assert read_files([str(edge)]) == [(str(edge), "#" * MAX_CONFIG_FILE)]


def test_a_read_that_does_not_finish_in_time_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung mount: the read blocks in the kernel. It is left on its daemon thread and the
    file refused with the reason (the `timeout` is the caller's: none of this test's waits)."""
    release = threading.Event()
    started = threading.Event()

    def hung(path: str, limit: int) -> bytes:
        started.set()
        release.wait(HANG)
        return b"too late"

    monkeypatch.setattr(bounded_read, "_read", hung)
    try:
        with pytest.raises(Unreadable, match=r"^no answer within 0\.01s \(a hung mount\?\)$"):
            read_bounded(str(tmp_path / "secret"), 100, timeout=0.01)
        assert started.is_set()
    finally:
        release.set()


def test_a_regular_file_is_read_whole_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"abc")
    assert read_bounded(str(path), 3) == b"abc"
    with pytest.raises(bounded_read.TooLarge, match=r"^larger than 2 bytes$"):
        read_bounded(str(path), 2)
    with pytest.raises(Unreadable, match=r"^No such file or directory$"):
        read_bounded(str(tmp_path / "missing"), 3)
