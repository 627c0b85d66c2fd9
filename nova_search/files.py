"""Files: written atomically (a crash never leaves one half-written), and read with a bound (never
blocking on a FIFO or a device, never reading without end)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, fsync it, then ``os.replace`` it into place:
    readers see the old file or the whole new one, never a part."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; give it what a plain open() would
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


class UnreadableFile(OSError):
    """A file nova will not read: not a regular file (a FIFO, a device, a directory), or larger than
    the bound for its kind. Its message names the file and says why; ``kind`` says what it is when it
    is not a regular file ("a FIFO (named pipe)"), None when it is too large."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


#: the bounds on what nova reads (bytes): a model's config.json, a tokenizer.json (large vocabularies
#: run to tens of MB), a workload file (ShareGPT's JSON is about 650 MB)
MAX_CONFIG_BYTES = 16 << 20
MAX_TOKENIZER_BYTES = 512 << 20
MAX_WORKLOAD_BYTES = 4 << 30


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def special_file(path: str | os.PathLike[str], *, folder_ok: bool = False) -> str | None:
    """What ``path`` is when it exists and nova could not read it as a file ("a FIFO (named pipe)", "a
    character device", "a socket"; "a directory" unless ``folder_ok``), links followed; None for a
    regular file, a missing path or one that cannot be looked at (read later, with its own error).
    Never opens it: a FIFO would block."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return None
    return _kind(mode)


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. Never blocks on a FIFO or a device: the
    file is checked with ``stat`` (links followed), opened with O_NONBLOCK and checked again with
    ``fstat`` (a file swapped after the check), and at most ``limit + 1`` bytes are read (a file that
    grows). Raises ``UnreadableFile`` (an OSError) naming the file otherwise, or the open's OSError."""
    p = Path(path)
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(f"{p} is {_kind(st.st_mode)}, not a regular file", _kind(st.st_mode))
    if st.st_size > limit:
        raise UnreadableFile(f"{p} is larger than {_size(limit)} ({_size(st.st_size)})")
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped between the stat and the open
            raise UnreadableFile(f"{p} is {_kind(mode)}, not a regular file", _kind(mode))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile(f"{p} is larger than {_size(limit)}")
    return data


def read_text_bounded(path: str | os.PathLike[str], limit: int) -> str:
    """``read_bounded`` as UTF-8 text (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bounded(path, limit).decode("utf-8")


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


#: the most of a log kept (a server's log, stored as a trial's artifact): its first LOG_HEAD_BYTES (how
#: it started) and the rest from its end (how it ended)
MAX_LOG_BYTES = 8 << 20
LOG_HEAD_BYTES = 1 << 20


def cap_log(path: str | os.PathLike[str], target: str | os.PathLike[str] | None = None) -> bool:
    """Write ``path`` cut to MAX_LOG_BYTES (its head and its tail, a line saying how much was left
    out between them) to ``target`` (default: ``path`` itself, replaced atomically). True when it was
    over the cap (and so written), False when it was not (nothing written) or cannot be read."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size <= MAX_LOG_BYTES:
            return False
        with p.open("rb") as f:
            head = f.read(LOG_HEAD_BYTES)
            f.seek(size - (MAX_LOG_BYTES - LOG_HEAD_BYTES))
            rest = f.read()
    except OSError:
        return False
    gap = size - len(head) - len(rest)
    note = f"\n[nova-search: {gap} bytes of this log left out; it keeps {MAX_LOG_BYTES} bytes]\n".encode()
    out = Path(target) if target is not None else p
    tmp = out.with_name(out.name + ".cap")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(head + note + rest)
        os.replace(tmp, out)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    return True
