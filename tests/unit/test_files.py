"""Bounded reads (nova_search.files.read_bounded, issue 40 finding 5): a FIFO, a device or a file past
its bound is refused at once with a message naming it; a regular file is read whole."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from nova_search.files import UnreadableFile, read_bounded, read_text_bounded


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "config.json"
    f.write_text('{"vocab_size": 7}')
    assert read_text_bounded(f, 1000) == '{"vocab_size": 7}'


def test_a_fifo_is_refused_without_blocking_even_with_a_writer_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UnreadableFile, match=r"config\.json is a FIFO \(named pipe\), not a regular file"):
        read_bounded(fifo, 1000)
    assert time.monotonic() - started < 1


def test_a_link_to_dev_zero_is_refused_not_read_without_end(tmp_path: Path) -> None:
    link = tmp_path / "prompts.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(UnreadableFile, match="a character device, not a regular file"):
        read_bounded(link, 1 << 20)


def test_a_file_past_its_bound_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "big.jsonl"
    f.write_bytes(b"x" * 2048)
    with pytest.raises(UnreadableFile, match=r"big\.jsonl is larger than 1 KiB \(2 KiB\)"):
        read_bounded(f, 1024)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match="a directory, not a regular file"):
        read_bounded(tmp_path, 1024)


def test_a_fifo_swapped_in_after_the_check_never_blocks(tmp_path: Path, monkeypatch) -> None:
    """The stat says regular; the open finds a FIFO (O_NONBLOCK: no wait) and fstat refuses it."""
    real, fifo = tmp_path / "real", tmp_path / "fifo"
    real.write_text("{}")
    os.mkfifo(fifo)
    stat_of_real = os.stat(real)
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: stat_of_real)
    done = threading.Event()

    def read() -> None:
        with pytest.raises(UnreadableFile, match="FIFO"):
            read_bounded(fifo, 1000)
        done.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout=5)
    assert done.is_set()
