"""Where a concurrency sweep stops paying: the saturation level and what limits it. Pure functions.

Output throughput grows with concurrency until something runs out: KV-cache blocks (the engine
preempts or cannot admit more sequences), batch slots (requests queue behind ``max_num_seqs``), or
compute (the batch is as fast as it gets). ``find_saturation`` finds the first level after which
more concurrency buys nothing beyond the noise, and reads the engine's gauges there for the cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from nova_search.analysis.noise import MIN_SAMPLES, compare
from nova_search.measure.metrics import LevelResult

Limiter = Literal["kv_cache", "queue", "compute", "unknown"]

#: KV-cache usage at or above this share, at or after saturation, names the KV cache as the limiter
KV_FULL = 0.9


@dataclass(frozen=True)
class Saturation:
    """``concurrency``: the lowest level after which output throughput stops growing, None when it
    grows through the last level (or there are fewer than two levels). ``output_throughput``: its
    throughput (the median of its repeats when given). ``limiter``: None when not saturated, else
    ``kv_cache``, ``queue``, ``compute`` or ``unknown``. ``explanation``: one or two sentences."""

    concurrency: int | None
    output_throughput: float | None
    limiter: Limiter | None
    explanation: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _grows(
    low: int,
    high: int,
    throughput: Mapping[int, float],
    repeats: Mapping[int, Sequence[float]],
    tolerance: float,
) -> bool:
    """Whether level ``high`` has more output throughput than level ``low`` beyond the noise."""
    ra, rb = repeats.get(low, ()), repeats.get(high, ())
    if len(ra) >= MIN_SAMPLES and len(rb) >= MIN_SAMPLES:
        return compare(ra, rb, higher_is_better=True).verdict == "verified_gain"
    base, top = throughput[low], throughput[high]
    if base <= 0.0:
        return top > 0.0
    return (top - base) / base >= tolerance


def _limiter(after: Sequence[LevelResult]) -> tuple[Limiter, str]:
    kv = [lv.kv_cache_usage_peak for lv in after if lv.kv_cache_usage_peak is not None]
    preempt = [lv.preemptions for lv in after if lv.preemptions is not None]
    waiting = [lv.num_waiting_mean for lv in after if lv.num_waiting_mean is not None]
    if (kv and max(kv) >= KV_FULL) or (preempt and max(preempt) > 0):
        parts = []
        if kv and max(kv) >= KV_FULL:
            parts.append(f"KV-cache usage peaks at {max(kv):.0%}")
        if preempt and max(preempt) > 0:
            parts.append(f"{max(preempt):g} preemptions in a window")
        return "kv_cache", " and ".join(parts) + ": the KV cache is full"
    if waiting and max(waiting) > 0:
        return "queue", (
            f"requests wait in the engine's queue (mean depth up to {max(waiting):.1f}): the batch is "
            "full at max_num_seqs (or the token budget)"
        )
    if kv and waiting:
        preemption = " and no preemption" if preempt else ""
        return "compute", (
            f"no queue, KV-cache usage at most {max(kv):.0%}{preemption}: the engine is "
            "compute-bound (a bigger batch is no faster)"
        )
    missing = [name for name, got in (("KV-cache usage", kv), ("queue depth", waiting)) if not got]
    return "unknown", f"no engine metrics ({' or '.join(missing)}) at or after saturation"


def find_saturation(
    levels: Sequence[LevelResult],
    repeats: Mapping[int, Sequence[float]] | None = None,
    tolerance: float = 0.05,
) -> Saturation:
    """The saturation point of one trial's sweep.

    Levels are read in concurrency order. Level L is saturated when no higher level has more output
    throughput than L beyond the noise; the answer is the lowest such L that has a level above it
    (the last level is never the answer: nothing was measured after it). "Beyond the noise" is
    decided per pair of levels:

    - when ``repeats`` holds >= 3 output-throughput samples for both levels (concurrency ->
      samples), the higher level must be a ``verified_gain`` of ``noise.compare`` (its whole 95 % CI
      above 0);
    - otherwise (no repeats, or too few), its throughput must exceed L's by at least ``tolerance``
      (relative, default 5 %).

    Checking every higher level, not just the next, keeps a slow steady climb (4 % per level over
    many levels) from being called saturated at its first step. A level's throughput is the median
    of its repeats when given, else its ``output_throughput``.

    The limiter is read from the levels at and after saturation: ``kv_cache`` when KV-cache usage
    peaks at >= 0.9 or any preemption happened; else ``queue`` when requests waited
    (``num_waiting_mean`` > 0); else ``compute`` when both KV usage and queue depth were measured
    and show neither; else ``unknown`` (no engine metrics).
    """
    if not 0.0 <= tolerance:
        raise ValueError(f"tolerance must be >= 0 (got {tolerance!r})")
    repeats = repeats or {}
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    concurrencies = [lv.concurrency for lv in ordered]
    if len(set(concurrencies)) != len(concurrencies):
        raise ValueError(f"find_saturation: duplicate concurrency levels {concurrencies}")
    if len(ordered) < 2:
        return Saturation(None, None, None, "fewer than two levels: saturation cannot be judged")
    throughput = {
        lv.concurrency: (
            float(np.median(repeats[lv.concurrency]))
            if len(repeats.get(lv.concurrency, ())) > 0
            else lv.output_throughput
        )
        for lv in ordered
    }
    for i, lv in enumerate(ordered[:-1]):
        higher = concurrencies[i + 1 :]
        if any(_grows(lv.concurrency, c, throughput, repeats, tolerance) for c in higher):
            continue
        limiter, why = _limiter(ordered[i:])
        best = max(throughput[c] for c in concurrencies[i:])
        explanation = (
            f"output throughput stops growing at concurrency {lv.concurrency} "
            f"({throughput[lv.concurrency]:.1f} tok/s; no higher level gains beyond the noise, best "
            f"{best:.1f}); "
            f"{why}"
        )
        return Saturation(lv.concurrency, throughput[lv.concurrency], limiter, explanation)
    return Saturation(
        None,
        None,
        None,
        f"output throughput still grows at the last level (concurrency {concurrencies[-1]}): "
        "not saturated within the sweep",
    )
