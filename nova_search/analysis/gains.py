"""A speculative candidate against the tuned baseline at one concurrency level: the trials as the
verdict sees them (``Profile``), the gain on the ranking metric (``level_gain``: on their ABBA pairs
where they have them, else on each side's own windows, with ``analysis.compare``), which of two gains is
the better candidate (``better_gain``), and what the latencies did (``tradeoffs``). Pure functions over
small frozen records; the verdict over a whole study: ``verdict``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nova_search.analysis import projection
from nova_search.analysis.noise import compare
from nova_search.knobs import EngineConfig

#: latency metrics whose movement the verdict states (mean and p99: the reference study's tradeoffs)
TRADEOFF_METRICS = (
    "ttft_mean_ms",
    "ttft_p99_ms",
    "tpot_mean_ms",
    "tpot_p99_ms",
    "itl_mean_ms",
    "itl_p99_ms",
    "e2e_mean_ms",
    "e2e_p99_ms",
)
#: a change smaller than this (in %) is called "unchanged" in the tradeoffs
FLAT_PCT = 2.0


@dataclass(frozen=True)
class Profile:
    """One trial as the verdict sees it. ``key`` names it uniquely across stages (``tune#3``)."""

    key: str
    study: str
    number: int
    role: str
    config: EngineConfig
    argv: tuple[str, ...]
    #: per level: metric -> the level's value (the median over windows)
    levels: Mapping[int, Mapping[str, float | None]]
    #: per level: the per-window samples, metric -> value (empty: one window only)
    windows: Mapping[int, Sequence[Mapping[str, float]]] = field(default_factory=dict)
    #: greedy output equals its non-speculative base's within the tolerance (None: not checked)
    equivalent: bool | None = None
    equivalence_note: str = ""
    #: the trial this one was measured against in ABBA pairs (``confirm``); per level: (its, our) windows
    paired_with: str | None = None
    paired: Mapping[int, tuple[Sequence[Mapping[str, float]], ...]] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return self.config.speculative.method if self.config.speculative else "none"

    @property
    def k(self) -> int | None:
        return self.config.speculative.num_speculative_tokens if self.config.speculative else None

    def paired_samples(self, other: str, level: int, metric: str) -> tuple[list[float], list[float]]:
        """(other's, our) samples of a metric from the ABBA pairs against ``other``; else empty."""
        if self.paired_with != other or level not in self.paired:
            return [], []
        a, b = self.paired[level][:2]
        return _column(a, metric), _column(b, metric)

    def samples(self, level: int, metric: str) -> list[float]:
        """The window samples of a metric at a level; the level's single value when there is one window."""
        ws = _column(self.windows.get(level, ()), metric)
        if ws:
            return ws
        v = self.levels.get(level, {}).get(metric)
        return [] if v is None else [float(v)]


def _column(windows: Sequence[Mapping[str, float]], metric: str) -> list[float]:
    return [float(w[metric]) for w in windows if w.get(metric) is not None]


@dataclass(frozen=True)
class LevelGain:
    concurrency: int
    trial: str
    diff_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    n_tuned: int
    n_candidate: int
    note: str = ""
    #: judged on ABBA pairs against the tuned baseline (confirm), not on each side's own windows
    paired: bool = False
    #: "projected at acceptance L=..." when the trial ran with synthetic acceptance
    projected: str | None = None

    @property
    def verified(self) -> bool:
        return self.verdict == "verified_gain"


@dataclass(frozen=True)
class Tradeoff:
    metric: str
    concurrency: int
    tuned: float
    candidate: float
    change_pct: float
    effect: Literal["improves", "regresses", "unchanged"]


def pct_change(new: float | None, base: float | None) -> float | None:
    """``new`` against ``base`` in percent; None when either is missing or base is 0."""
    if new is None or base is None or base == 0:
        return None
    return (new - base) / abs(base) * 100.0


def gain_key(g: LevelGain) -> float:
    """A gain to rank by; an undefined gain ranks last (0.0 is a gain like any other)."""
    return g.diff_pct if g.diff_pct is not None else float("-inf")


def level_gain(
    tuned: Profile, cand: Profile, level: int, metric: str, higher_is_better: bool, confidence: float
) -> LevelGain | None:
    # ABBA pairs against the tuned baseline (confirm) first: same prompts, side by side in time
    a, b = cand.paired_samples(tuned.key, level, metric)
    paired = bool(a and b)
    a, b = (a, b) if paired else (tuned.samples(level, metric), cand.samples(level, metric))
    if not a or not b:
        return None
    c = compare(a, b, higher_is_better=higher_is_better, confidence=confidence)
    return LevelGain(
        concurrency=level,
        trial=cand.key,
        diff_pct=c.diff_pct,
        ci_low=c.ci.low if c.ci else None,
        ci_high=c.ci.high if c.ci else None,
        verdict=c.verdict,
        n_tuned=c.n_a,
        n_candidate=c.n_b,
        note=c.note,
        paired=paired,
        projected=projection.label(cand.config),
    )


def better_gain(g: LevelGain, other: LevelGain | None) -> bool:
    """Is ``g`` the better candidate at its level: verified beats unverified, then the larger gain."""
    if other is None:
        return True
    if g.verified != other.verified:
        return g.verified
    return gain_key(g) > gain_key(other)


def tradeoffs(tuned: Profile, cand: Profile, level: int) -> tuple[Tradeoff, ...]:
    out = []
    for m in TRADEOFF_METRICS:
        a = tuned.levels.get(level, {}).get(m)
        b = cand.levels.get(level, {}).get(m)
        pct = pct_change(b, a)
        if pct is None or a is None or b is None:
            continue
        effect: Literal["improves", "regresses", "unchanged"]
        effect = "unchanged" if abs(pct) < FLAT_PCT else ("improves" if pct < 0 else "regresses")
        out.append(Tradeoff(m, level, float(a), float(b), pct, effect))
    return tuple(out)
