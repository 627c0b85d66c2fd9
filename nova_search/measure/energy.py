"""GPU energy over a measurement window, from power samples. Pure functions.

A ``PowerSample`` is one GPU's power draw (watts) read at one time (``time.perf_counter()``, the clock of
the window's records). ``energy_j`` integrates each GPU's samples over ``[start, end]`` only (the
trapezoid rule, each GPU's power at ``start`` and ``end`` interpolated from its neighbours, or held from
the nearest sample at an edge) and sums the GPUs. A GPU with no sample within one ``gap_s`` of the
window cannot be integrated: None, never zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class PowerSample:
    time: float
    gpu: int
    watts: float


def _at(times: np.ndarray, watts: np.ndarray, t: float) -> float:
    return float(np.interp(t, times, watts))  # held flat beyond the first and last sample


def energy_j(samples: Sequence[PowerSample], start: float, end: float, gap_s: float = 2.0) -> float | None:
    """Joules drawn by the sampled GPUs over ``[start, end]``; None without samples that cover it
    (each GPU needs a sample no further than ``gap_s`` outside the window on both sides)."""
    if end <= start or not samples:
        return None
    total = 0.0
    for gpu in sorted({s.gpu for s in samples}):
        rows = sorted((s.time, s.watts) for s in samples if s.gpu == gpu)
        times = np.array([t for t, _ in rows], dtype=float)
        watts = np.array([w for _, w in rows], dtype=float)
        if times[0] > start + gap_s or times[-1] < end - gap_s:
            return None
        inside = (times > start) & (times < end)
        t = np.concatenate(([start], times[inside], [end]))
        w = np.concatenate(([_at(times, watts, start)], watts[inside], [_at(times, watts, end)]))
        total += float(np.trapezoid(w, t))
    return total
