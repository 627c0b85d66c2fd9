"""A production trace read from its file: when each request came, how long its prompt and its output
were, and (Mooncake) which prefix blocks its prompt shares with others.

Formats (``workload.trace_format``):

- ``mooncake``: JSON lines ``{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids":
  [...]}``, as the Mooncake traces publish them; ``hash_ids[k]`` names the prompt's k-th block of
  ``workload.block_size`` tokens (512 in Mooncake's), a block's hash covering every block before it,
  so two prompts with the same first k ids share their first k blocks. ``hash_ids`` may be left out.
- ``azure``: the Azure LLM inference traces (2023, 2024), CSV with a header: ``TIMESTAMP`` (a date
  and time, ``2023-11-16 18:15:46.6805900``, or seconds), ``ContextTokens``, ``GeneratedTokens``.
- ``burstgpt``: the BurstGPT trace, CSV with a header: ``Timestamp`` (seconds), ``Request tokens``,
  ``Response tokens`` (its other columns are ignored).

A line that is not what its format says is refused with its line number (``SpecError`` naming
``workload.path``), and so is a timestamp earlier than the line before it (a trace is replayed in
time order) and a file with no request. A request with no output tokens (BurstGPT logs failed
requests so) cannot be asked for: it is left out and counted (``Trace.no_output``).

The last trace read is kept (``read_trace`` reads a file again only when its size or mtime changed):
a worker reads it before its first trial, and each trial's sweep and deadline read it again.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from nova_search.errors import SpecError
from nova_search.files import MAX_WORKLOAD_BYTES, UnreadableFile, read_text_bounded

#: the largest token count a trace line may give (more is a corrupt line, not a prompt)
MAX_LENGTH = 10_000_000

#: each CSV format's columns: (time, prompt tokens, output tokens)
CSV_COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}


@dataclass(frozen=True, eq=False)
class Trace:
    """A trace's requests in time order: ``at[i]`` seconds after the first request, its prompt and
    output lengths, and its prefix blocks (``()`` where the format has none)."""

    path: str
    format: str
    block_size: int
    at: np.ndarray  # float64 seconds, non-decreasing, at[0] == 0
    input_len: np.ndarray  # int64 >= 1
    output_len: np.ndarray  # int64 >= 1
    hash_ids: tuple[tuple[int, ...], ...]
    #: requests left out: no output tokens
    no_output: int = 0

    def __len__(self) -> int:
        return len(self.at)

    @property
    def duration_s(self) -> float:
        return float(self.at[-1]) if len(self.at) else 0.0

    @property
    def rate(self) -> float | None:
        """Requests a second over the trace (None for a trace of one instant)."""
        return (len(self.at) - 1) / self.duration_s if self.duration_s > 0 else None


class _Refused(ValueError):
    """A line that is not what the format says (the message says what)."""


def _where(path: str, line: int) -> str:
    return f"workload.path: {path} line {line}"


def _count(value: Any, name: str, low: int) -> int:
    """A token count: an integer (a float with no fraction is one) in [low, MAX_LENGTH]."""
    if isinstance(value, str):
        try:
            value = float(value) if value.strip() else None
        except ValueError:
            raise _Refused(f"{name} {value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Refused(f"{name} must be a whole number of tokens (got {value!r})")
    if value != int(value) or not low <= value <= MAX_LENGTH:
        raise _Refused(f"{name} must be a whole number in {low}..{MAX_LENGTH} (got {value!r})")
    return int(value)


def _seconds(value: Any, name: str, scale: float) -> float:
    """A timestamp as seconds: a number (times ``scale``) or, in a CSV, a date and time."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                return datetime.fromisoformat(text).timestamp()
            except ValueError:
                raise _Refused(f"{name} {value!r} is neither a number nor a date and time") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise _Refused(f"{name} must be a number >= 0 (got {value!r})")
    return float(value) * scale


def _hash_ids(value: Any, n_in: int, block: int) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in value
    ):
        raise _Refused("hash_ids must be a list of non-negative integers")
    blocks = -(-n_in // block)
    if len(value) > blocks:
        raise _Refused(
            f"hash_ids has {len(value)} blocks, but input_length {n_in} fills only {blocks} of "
            f"workload.block_size {block} tokens (is block_size the trace's?)"
        )
    return tuple(value)


Row = tuple[int, float, int, int, tuple[int, ...]]  # line, seconds, input, output, hash_ids


def _mooncake(text: str, block: int) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            try:
                record = json.loads(line)
            except ValueError as e:
                raise _Refused(f"not valid JSON: {e}") from None
            if not isinstance(record, dict):
                raise _Refused("not a JSON object")
            missing = [k for k in ("timestamp", "input_length", "output_length") if k not in record]
            if missing:
                need = "timestamp, input_length, output_length"
                raise _Refused(f"no {', '.join(missing)} (a mooncake line has {need})")
            n_in = _count(record["input_length"], "input_length", 1)
            rows.append(
                (
                    number,
                    _seconds(record["timestamp"], "timestamp (ms)", 1e-3),
                    n_in,
                    _count(record["output_length"], "output_length", 0),
                    _hash_ids(record.get("hash_ids"), n_in, block),
                )
            )
        except _Refused as e:
            raise _Refused(f"line {number}: {e}") from None
    return rows


def _csv(text: str, fmt: str) -> list[Row]:
    time_col, in_col, out_col = CSV_COLUMNS[fmt]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or ()]
    missing = [c for c in CSV_COLUMNS[fmt] if c not in header]
    if missing:
        raise _Refused(
            f"line 1: the header has no {', '.join(missing)} (a {fmt} trace has the columns "
            f"{', '.join(CSV_COLUMNS[fmt])}; found {', '.join(header) or 'none'})"
        )
    reader.fieldnames = header
    rows: list[Row] = []
    for record in reader:
        number = reader.line_num
        try:
            if None in record:
                raise _Refused(f"has more fields than the header's {len(header)}")
            if any(record.get(c) is None for c in CSV_COLUMNS[fmt]):
                raise _Refused(f"has fewer fields than the header's {len(header)}")
            rows.append(
                (
                    number,
                    _seconds(record[time_col], time_col, 1.0),
                    _count(record[in_col], in_col, 1),
                    _count(record[out_col], out_col, 0),
                    (),
                )
            )
        except _Refused as e:
            raise _Refused(f"line {number}: {e}") from None
    return rows


def parse_trace(text: str, path: str, fmt: str, block_size: int) -> Trace:
    """The trace in ``text`` (read from ``path``: errors name it). Raises SpecError."""
    try:
        rows = _mooncake(text, block_size) if fmt == "mooncake" else _csv(text, fmt)
    except _Refused as e:
        raise SpecError(f"workload.path: {path} {e}") from None
    except csv.Error as e:
        raise SpecError(f"workload.path: {path} is not a {fmt} CSV: {e}") from None
    for (_, before, *_), (number, t, *_) in zip(rows, rows[1:], strict=False):
        if t < before:
            raise SpecError(
                f"{_where(path, number)}: its time ({t:.6g} s) is earlier than the line before "
                f"({before:.6g} s): a trace is replayed in time order; sort it by its timestamp"
            )
    kept = [r for r in rows if r[3] > 0]
    if not kept:
        raise SpecError(
            f"workload.path: {path} holds no request to replay ({len(rows)} {fmt} lines, "
            f"{len(rows) - len(kept)} with no output tokens); give a {fmt} trace"
        )
    at = np.array([r[1] for r in kept], dtype=np.float64)
    return Trace(
        path=path,
        format=fmt,
        block_size=block_size,
        at=at - at[0],
        input_len=np.array([r[2] for r in kept], dtype=np.int64),
        output_len=np.array([r[3] for r in kept], dtype=np.int64),
        hash_ids=tuple(r[4] for r in kept),
        no_output=len(rows) - len(kept),
    )


_last: dict[tuple[Any, ...], Trace] = {}
_last_lock = threading.Lock()


def read_trace(path: str, fmt: str, block_size: int) -> Trace:
    """The trace at ``path`` (the last one read is kept while its file is unchanged). Raises SpecError
    naming ``workload.path``."""
    p = Path(path)
    try:
        st = os.stat(p)
        key: tuple[Any, ...] = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, fmt, block_size)
    except OSError:
        key = ()
    with _last_lock:
        if key and key in _last:
            return _last[key]
    try:
        text = read_text_bounded(p, MAX_WORKLOAD_BYTES)
    except UnreadableFile as e:
        raise SpecError(f"workload.path: {e}; give a {fmt} trace file") from None
    except OSError as e:
        raise SpecError(f"workload.path: cannot read {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"workload.path: {p} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    trace = parse_trace(text, str(p), fmt, block_size)
    if key:
        with _last_lock:
            _last.clear()
            _last[key] = trace
    return trace


# ---------------------------------------------------------------- what the report shows of it

#: bins of each histogram in a trace's summary
SUMMARY_BINS = 40


def _histogram(values: np.ndarray) -> dict[str, list[float]]:
    """Counts over SUMMARY_BINS bins, log-spaced when the values span more than two decades."""
    low, high = float(values.min()), float(values.max())
    if high <= low:
        edges = np.array([low - 0.5, high + 0.5])
    elif low > 0 and high / low > 100:
        edges = np.geomspace(low, high, SUMMARY_BINS + 1)
    else:
        edges = np.linspace(low, high, SUMMARY_BINS + 1)
    counts, edges = np.histogram(values, bins=edges)
    return {"edges": [round(float(e), 3) for e in edges], "counts": [int(c) for c in counts]}


def prefix_reuse(trace: Trace) -> float | None:
    """The share of the trace's prompt tokens in a hash_ids block an earlier request had: what a
    prefix cache that never evicts would hit. None without hash_ids."""
    if not any(trace.hash_ids):
        return None
    seen: set[int] = set()
    reused = 0
    for n, ids in zip(trace.input_len.tolist(), trace.hash_ids, strict=True):
        for k, h in enumerate(ids):
            if h in seen:
                reused += min(trace.block_size, n - k * trace.block_size)
            seen.add(h)
    return reused / max(int(trace.input_len.sum()), 1)


def trace_summary(trace: Trace, start_s: float = 0.0) -> dict[str, Any]:
    """The trace as the report shows it (stored on the study, ``schema.TRACE``): its size and rate,
    requests per second over time, the prompt and output length histograms, and its prefix reuse."""
    span = trace.duration_s
    bin_s = max(span / SUMMARY_BINS, 1e-3)
    arrivals = np.bincount(np.minimum((trace.at / bin_s).astype(np.int64), SUMMARY_BINS - 1))
    return {
        "path": trace.path,
        "format": trace.format,
        "requests": len(trace),
        "no_output": trace.no_output,
        "duration_s": span,
        "rate": trace.rate,
        "start_s": start_s,
        "block_size": trace.block_size if any(trace.hash_ids) else None,
        "prefix_reuse": prefix_reuse(trace),
        "arrivals": {"bin_s": bin_s, "counts": [int(c) for c in arrivals]},
        "input_len": _histogram(trace.input_len),
        "output_len": _histogram(trace.output_len),
    }
