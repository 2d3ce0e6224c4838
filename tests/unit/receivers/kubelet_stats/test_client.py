"""The token file and the HTTP client's error mapping (the wire itself: tests/integration)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otelgpu.receivers.kubelet_stats.client import HttpKubeletClient, KubeletError, TokenFile


def test_token_is_reread_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first-token\n")
    token = TokenFile(str(path))
    assert token.read() == "first-token"
    # A rotated projected token: kubelet swaps the file (new inode, usually a new size).
    path.unlink()
    path.write_text("second-token-longer")
    assert token.read() == "second-token-longer"


def test_token_cached_while_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("abc")
    token = TokenFile(str(path))
    token.read()
    stamp = path.stat()
    path.write_text("xyz")  # same size; restore the old mtime to prove the cache is used
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert token.read() == "abc"


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_missing_or_empty_token_names_the_path_only(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeletError) as err:
        TokenFile(str(path)).read()
    assert err.value.reason == "token"
    assert str(path) in str(err.value)


def test_a_token_that_disappears_is_an_error_not_the_stale_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("secret-value")
    token = TokenFile(str(path))
    token.read()
    path.unlink()
    with pytest.raises(KubeletError) as err:
        token.read()
    assert "secret-value" not in str(err.value)


async def test_unloadable_ca_file_is_a_tls_error_every_time(tmp_path: Path) -> None:
    client = HttpKubeletClient(
        "https://127.0.0.1:9/stats/summary",
        token=None,
        ca_file=str(tmp_path / "missing-ca.crt"),
        verify=True,
        timeout=1.0,
    )
    for _ in range(2):
        with pytest.raises(KubeletError) as err:
            await client.summary()
        assert err.value.reason == "tls" and "missing-ca.crt" in str(err.value)
    await client.close()
    await client.close()


async def test_nothing_listening_is_a_connect_error() -> None:
    client = HttpKubeletClient(
        "http://127.0.0.1:9/stats/summary", token=None, ca_file=None, verify=True, timeout=2.0
    )
    with pytest.raises(KubeletError) as err:
        await client.summary()
    await client.close()
    assert err.value.reason == "connect"


def test_a_projected_token_rotated_by_symlink_swap_is_read_again(tmp_path: Path) -> None:
    """The kubelet updates a projected volume as its atomic writer does: the new token goes in
    a fresh timestamped directory and the `..data` link is swapped to it; `token` is a link
    through `..data`. A token of the same length written in the same second is still seen."""
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    first = mount / "..2026_01_01_00_00_00.000000001"
    first.mkdir()
    (first / "token").write_text("token-aaaa")
    (mount / "..data").symlink_to(first.name)
    (mount / "token").symlink_to("..data/token")
    token = TokenFile(str(mount / "token"))
    assert token.read() == "token-aaaa"
    second = mount / "..2026_01_01_00_00_00.000000002"
    second.mkdir()
    (second / "token").write_text("token-bbbb")
    stamp = (first / "token").stat()
    os.utime(second / "token", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    (mount / "..data_tmp").symlink_to(second.name)
    os.replace(mount / "..data_tmp", mount / "..data")
    assert token.read() == "token-bbbb"
