"""The committed excerpt of a study's server logs: what the results READMEs and tests quote from them.

A session's ``server-logs.tgz`` (``benchmarks/gpu/study.sh collect``: the workers' artifacts folder,
every vLLM server's log and every request record) runs to megabytes, nearly all of it vLLM's access log
(one line a request, one a /metrics scrape) and the request records. Those stay out of the repository;
the excerpt keeps every other line of every ``*.log`` (boots, compile-cache lines, memory, sleeps and
wakes, errors), under the same member names, so ``tar -xzf`` and ``grep`` read it as they read the whole.

    python3 benchmarks/results/log_excerpt.py OUT/server-logs.tgz \
        benchmarks/results/STUDY/server-logs.excerpt.tgz
"""

from __future__ import annotations

import io
import re
import sys
import tarfile
from pathlib import Path

#: vLLM's access-log lines for requests and metric scrapes: one per request, quoted by no figure
_ACCESS = re.compile(rb'"(POST /v1/(chat/)?completions|GET /metrics) HTTP/')


def excerpt(text: bytes) -> bytes:
    """The log without its per-request access lines."""
    return b"".join(line for line in text.splitlines(keepends=True) if not _ACCESS.search(line))


def write_excerpt(archive: Path, out: Path) -> None:
    """Every ``*.log`` member of ``archive``, excerpted, in a new gzip'd tar at ``out`` (same names)."""
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz", compresslevel=9) as dst:
        for member in sorted(src.getmembers(), key=lambda m: m.name):
            f = src.extractfile(member) if member.name.endswith(".log") else None
            if f is None:
                continue
            data = excerpt(f.read())
            info = tarfile.TarInfo(member.name)
            info.size, info.mtime, info.mode = len(data), member.mtime, 0o644
            dst.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    write_excerpt(Path(sys.argv[1]), Path(sys.argv[2]))
