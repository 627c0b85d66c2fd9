"""The break-even map of speculative decoding: for a drafter (method, k) and each concurrency level,
the smallest mean acceptance length L at which the drafter is verified better than the tuned baseline,
and the gain with its interval at the lengths measured. Pure: it reads measured rows
(``GainRow``: one drafter, k, level and synthetic acceptance length, judged against tuned by
``analysis.noise.compare`` on ABBA pairs) and says where the next length to measure lies
(``next_length``: bisection over L), what the map is (``break_even``) and which k to run at each
level (``k_schedule``: vLLM's ``num_speculative_tokens_per_batch_size``).

Where the rows come from: ``results.speculation.breakeven_rows`` (a staged study whose drafter carries
``acceptance: {lengths: {low, high}}`` and ``confirm``: each trial paired with the resident tuned
leader), or ``benchmarks/breakeven_h200.py`` (one engine per length, ABBA windows of ``vllm bench
serve`` against the tuned server). Every gain here is a projection at acceptance L: the drafter's cost
is real, its acceptance was chosen.

The search assumes the gain does not fall as L rises (more accepted tokens per step for the same
drafting cost); a row that breaks it is kept and reported (``BreakEven.monotone``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nova_search.analysis.noise import compare


@dataclass(frozen=True)
class GainRow:
    """One drafter at one synthetic acceptance length and level, against tuned."""

    method: str
    k: int
    concurrency: int
    #: the mean acceptance length asked (synthetic)
    length: float
    diff_pct: float | None
    ci_low: float | None
    ci_high: float | None
    #: verified_gain, verified_loss or not_verified (``analysis.noise.compare``)
    verdict: str
    n: int = 0
    #: where the row came from (a trial key, a run folder)
    source: str = ""

    @property
    def verified(self) -> bool:
        return self.verdict == "verified_gain"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gain_row(
    method: str,
    k: int,
    concurrency: int,
    length: float,
    tuned: Sequence[float],
    drafter: Sequence[float],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    source: str = "",
) -> GainRow:
    """A row from the windows of both sides (ABBA pairs: tuned's and the drafter's, in order)."""
    c = compare(tuned, drafter, higher_is_better=higher_is_better, confidence=confidence)
    return GainRow(
        method,
        k,
        concurrency,
        float(length),
        c.diff_pct,
        c.ci.low if c.ci else None,
        c.ci.high if c.ci else None,
        c.verdict,
        min(c.n_a, c.n_b),
        source,
    )


@dataclass(frozen=True)
class BreakEven:
    """Where one drafter starts to pay at one level."""

    method: str
    k: int
    concurrency: int
    #: the smallest measured L verified better, with every measured L above it verified too; None:
    #: verified nowhere up to the largest L measured
    length: float | None
    #: the largest measured L below ``length`` that is not verified (the break-even lies in
    #: (below, length]); None when ``length`` is the smallest measured (or there is none)
    below: float | None
    #: every measured length, lowest first: (L, gain %, interval low, interval high, verdict)
    gains: tuple[tuple[float, float | None, float | None, float | None, str], ...] = field(default=())
    #: False when a verified length has an unverified or losing one above it (noise, or a drafter
    #: whose gain falls with L): ``length`` is then the smallest L above the last unverified one
    monotone: bool = True

    @property
    def pays(self) -> bool:
        return self.length is not None

    def text(self) -> str:
        if self.length is None:
            top = max((g[0] for g in self.gains), default=None)
            return "never verified" + (f" up to L={top:g}" if top is not None else "")
        if self.below is None:
            return f"<= {self.length:g}"
        return f"({self.below:g}, {self.length:g}]"


def _cells(rows: Iterable[GainRow]) -> dict[tuple[str, int, int], list[GainRow]]:
    cells: dict[tuple[str, int, int], list[GainRow]] = {}
    for r in rows:
        cells.setdefault((r.method, r.k, r.concurrency), []).append(r)
    return cells


def _per_length(rows: Sequence[GainRow]) -> list[GainRow]:
    """One row per length (the last given wins: a length measured again replaces the earlier)."""
    by: dict[float, GainRow] = {}
    for r in rows:
        by[round(r.length, 6)] = r
    return [by[x] for x in sorted(by)]


def break_even(rows: Iterable[GainRow]) -> list[BreakEven]:
    """The break-even of every (method, k, level) the rows hold, sorted."""
    out = []
    for (method, k, c), cell in sorted(_cells(rows).items()):
        ordered = _per_length(cell)
        gains = tuple((r.length, r.diff_pct, r.ci_low, r.ci_high, r.verdict) for r in ordered)
        # the smallest L from which every measured length up is verified
        start = None
        for i in range(len(ordered) - 1, -1, -1):
            if not ordered[i].verified:
                break
            start = i
        monotone = True
        seen_verified = False
        for r in ordered:
            seen_verified = seen_verified or r.verified
            if seen_verified and not r.verified:
                monotone = False
        if start is None:
            out.append(BreakEven(method, k, c, None, None, gains, monotone))
            continue
        below = ordered[start - 1].length if start > 0 else None
        out.append(BreakEven(method, k, c, ordered[start].length, below, gains, monotone))
    return out


def next_length(rows: Iterable[GainRow], low: float, high: float, *, tolerance: float = 0.1) -> float | None:
    """The next acceptance length to measure for one (method, k, level), by bisection over [low, high]:
    first the two ends, then the middle of the bracket (the largest unverified L below the smallest
    verified L from which all above are verified); None when the bracket is narrower than
    ``tolerance``, or when the top end is not verified (it never pays in range) or the bottom end is
    (it pays everywhere in range)."""
    cell = _per_length(list(rows))
    measured = {round(r.length, 6): r for r in cell}
    for end in (high, low):
        if round(end, 6) not in measured:
            return end
    if not measured[round(high, 6)].verified or measured[round(low, 6)].verified:
        return None
    be = break_even(cell)[0]
    lo = be.below if be.below is not None else low
    hi = be.length if be.length is not None else high
    if hi - lo <= tolerance:
        return None
    return round((lo + hi) / 2.0, 3)


def k_schedule(
    rows: Iterable[GainRow], length: float, *, method: str | None = None, max_batch: int = 1024
) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int | None, float | None], ...]]:
    """The best k per level at acceptance ``length`` (each (method, k) at the measured L nearest to it,
    not above: a k whose gain is not verified there gives 0, drafting off), written as vLLM's
    ``num_speculative_tokens_per_batch_size`` rows [min_batch, max_batch, k]: a level's k holds from it
    up to the next level whose k differs, the last up to ``max_batch``. Returns (schedule, the choice
    per level: (level, k or None, its gain %))."""
    chosen: dict[int, tuple[int | None, float | None]] = {}
    for (m, k, c), cell in sorted(_cells(rows).items()):
        if method is not None and m != method:
            continue
        at = [r for r in _per_length(cell) if r.length <= length + 1e-9]
        chosen.setdefault(c, (None, None))
        if not at:
            continue
        r = at[-1]
        best_k, best_gain = chosen[c]
        if r.verified and r.diff_pct is not None and (best_gain is None or r.diff_pct > best_gain):
            chosen[c] = (k, r.diff_pct)
    levels = sorted(chosen)
    choice = tuple((c, chosen[c][0], chosen[c][1]) for c in levels)
    runs: list[list[int]] = []  # [min_batch, k]
    for c in levels:
        k = chosen[c][0] or 0
        if not runs:
            runs.append([1, k])
        elif runs[-1][1] != k:
            runs.append([c, k])
    top = max(max_batch, levels[-1] if levels else 1)
    schedule = tuple(
        (lo, (runs[i + 1][0] - 1) if i + 1 < len(runs) else top, k) for i, (lo, k) in enumerate(runs)
    )
    return schedule, choice


def acceptance_length(accepted_tokens: float, drafts: float) -> float | None:
    """Mean acceptance length from vLLM's counters (``vllm:spec_decode_num_accepted_tokens_total`` and
    ``vllm:spec_decode_num_drafts_total``, differences over a run): 1 + accepted / drafts."""
    if drafts <= 0:
        return None
    return 1.0 + accepted_tokens / drafts
