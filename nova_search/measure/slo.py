"""The SLO: what each request must meet, and whether a level of load meets it. Pure functions.

- ``Bound``: one latency, one percentile, one maximum (``ttft p99 <= 500 ms``): the statement "at least
  p % of the requests have this latency at most this". A request *meets* a bound when it succeeded and
  its latency is at most the maximum (TTFT, E2E; TPOT: (E2E - TTFT) / (output tokens - 1); ITL: the
  request's longest inter-token gap, per token). TPOT and ITL are undefined for a one-token output
  (there is no decode phase): such a request meets a TPOT or ITL bound; a request without any output
  chunk misses a TTFT or E2E bound; a failed request misses every bound.
- ``SLO``: several bounds at once, and optionally a ``target``: the share of requests that must meet
  every bound together. A request meets the SLO when it meets every bound (goodput counts them).
- ``count``: a level's requests -> ``SLOCounts`` (how many met every bound, how many met each one, of
  how many measured and how many planned).
- ``judge``: ``SLOCounts`` -> ``Judgement``: each check (each bound against its percentile, the joint
  share against ``target``) as a share with its Wilson interval, and the level's ``verdict``: ``meets``
  when every interval lies at or above its threshold, ``misses`` when one lies wholly below, else
  ``straddles``. A window that was abandoned before all its planned requests were sent (``MissRule``)
  is judged on its plan: the requests never sent count as misses for the lower end and as met for the
  upper end, so a verdict never rests on requests that were not measured.
- A threshold of 1 (percentile 100, target 1) can lie inside no interval: it is checked on the sample
  itself (every planned request met it: ``meets``; one did not: ``misses``).
- ``MissRule``: how many misses a window of ``planned`` requests tolerates per check before it is
  clearly over saturation (even if every request still to come met, the share's upper end would lie
  below its threshold): the load generator abandons the window then (``loadgen.runner``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

from nova_search.measure.records import RequestRecord

#: the per-request latencies a bound may name
SLO_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e")
Verdict = Literal["meets", "misses", "straddles"]
#: how sure an interval is, unless the spec says otherwise
DEFAULT_CONFIDENCE = 0.95


def request_latency_s(r: RequestRecord, metric: str) -> float | None:
    """A request's latency (seconds) for a bound: None when undefined for it."""
    if metric == "ttft":
        return r.ttft
    if metric == "e2e":
        return r.e2e
    if metric == "tpot":
        return r.tpot
    if metric == "itl":
        gaps = r.itls()
        return max(gaps) if gaps else None
    raise ValueError(f"unknown SLO metric {metric!r}; valid: {', '.join(SLO_METRICS)}")


@dataclass(frozen=True)
class Bound:
    """``percentile`` % of the requests have ``metric`` at most ``max_ms`` (see the module docstring)."""

    metric: str
    percentile: float
    max_ms: float

    def __post_init__(self) -> None:
        if self.metric not in SLO_METRICS:
            raise ValueError(f"metric: unknown {self.metric!r}; valid: {', '.join(SLO_METRICS)}")
        if not (math.isfinite(self.percentile) and 0.0 < self.percentile <= 100.0):
            raise ValueError(f"percentile: must be in (0, 100] (got {self.percentile!r})")
        if not (math.isfinite(self.max_ms) and self.max_ms > 0.0):
            raise ValueError(f"max_ms: must be a finite number > 0 (got {self.max_ms!r})")

    @property
    def name(self) -> str:
        """``p99 ttft <= 500 ms``."""
        return f"p{self.percentile:g} {self.metric} <= {self.max_ms:g} ms"

    @property
    def threshold(self) -> float:
        return self.percentile / 100.0

    def met_by(self, r: RequestRecord) -> bool:
        if not r.success:
            return False
        seconds = request_latency_s(r, self.metric)
        if seconds is None:  # TPOT / ITL without a decode phase: nothing to bound; TTFT / E2E: a miss
            return self.metric in ("tpot", "itl")
        return seconds * 1000.0 <= self.max_ms

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "percentile": self.percentile, "max_ms": self.max_ms}


@dataclass(frozen=True)
class SLO:
    """Every bound at once; ``target``: the share of requests that must meet them all together (None:
    only each bound's own percentile); ``confidence``: of the intervals the verdict reads."""

    bounds: tuple[Bound, ...]
    target: float | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if not self.bounds:
            raise ValueError("bounds: give at least one")
        if self.target is not None and not (math.isfinite(self.target) and 0.0 < self.target <= 1.0):
            raise ValueError(f"target: must be in (0, 1] (got {self.target!r})")
        if not (math.isfinite(self.confidence) and 0.0 < self.confidence < 1.0):
            raise ValueError(f"confidence: must be in (0, 1) (got {self.confidence!r})")

    def met_by(self, r: RequestRecord) -> bool:
        """The request meets every bound (what goodput counts)."""
        return all(b.met_by(r) for b in self.bounds)

    @property
    def name(self) -> str:
        """``p99 ttft <= 500 ms and p90 tpot <= 50 ms`` (``, 95 % of requests all of them``)."""
        text = " and ".join(b.name for b in self.bounds)
        return text + (f", {self.target:.4g} of requests all of them" if self.target is not None else "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "bounds": [b.as_dict() for b in self.bounds],
            "target": self.target,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SLO:
        bounds = tuple(
            Bound(str(b["metric"]), float(b["percentile"]), float(b["max_ms"])) for b in d["bounds"]
        )
        target = d.get("target")
        return cls(bounds, None if target is None else float(target), float(d.get("confidence") or 0.95))


# ---------------------------------------------------------------- counting and judging


@dataclass(frozen=True)
class SLOCounts:
    """One level's requests against an SLO: ``met`` every bound, ``met_each`` bound (in the SLO's
    order), of ``measured`` requests; ``planned``: the requests the window meant to send (more than
    ``measured`` when it was abandoned; None: a window of a duration, not a count)."""

    measured: int
    met: int
    met_each: tuple[int, ...]
    planned: int | None = None

    @property
    def share(self) -> float | None:
        """The share of measured requests that met every bound (the level's attainment)."""
        return self.met / self.measured if self.measured else None

    def plus(self, other: SLOCounts) -> SLOCounts:
        """Two windows of one level, pooled."""
        planned = None if self.planned is None or other.planned is None else self.planned + other.planned
        return SLOCounts(
            self.measured + other.measured,
            self.met + other.met,
            tuple(a + b for a, b in zip(self.met_each, other.met_each, strict=True)),
            planned,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "met": self.met,
            "met_each": list(self.met_each),
            "planned": self.planned,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SLOCounts:
        planned = d.get("planned")
        return cls(
            int(d["measured"]),
            int(d["met"]),
            tuple(int(x) for x in d["met_each"]),
            None if planned is None else int(planned),
        )


def count(records: Iterable[RequestRecord], slo: SLO, planned: int | None = None) -> SLOCounts:
    """How many of ``records`` meet ``slo`` (every bound) and each of its bounds."""
    rows = [tuple(b.met_by(r) for b in slo.bounds) for r in records]
    each = tuple(sum(row[i] for row in rows) for i in range(len(slo.bounds)))
    measured = len(rows)
    return SLOCounts(measured, sum(1 for row in rows if all(row)), each, planned)


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a binomial share ``successes / n`` (``(0, 1)`` for ``n`` = 0)."""
    if n <= 0:
        return 0.0, 1.0
    z = z_of(confidence)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Check:
    """One check of a level: ``what`` (a bound's name, or ``all bounds``) met by ``share`` of the
    requests, its interval ``[low, high]``, against ``threshold``; ``verdict`` as the module says."""

    what: str
    threshold: float
    met: int
    of: int
    share: float | None
    low: float
    high: float
    verdict: Verdict

    def as_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "threshold": self.threshold,
            "met": self.met,
            "of": self.of,
            "share": self.share,
            "low": self.low,
            "high": self.high,
            "verdict": self.verdict,
        }


def check(
    what: str, met: int, measured: int, planned: int | None, threshold: float, confidence: float
) -> Check:
    """One share against its threshold. Requests planned but never sent count as misses for the lower
    end and as met for the upper end (a window abandoned once clearly over saturation)."""
    n = max(planned or 0, measured)
    unsent = n - measured
    share = met / measured if measured else None
    low, _ = wilson(met, n, confidence)
    _, high = wilson(met + unsent, n, confidence)
    if n == 0:
        verdict: Verdict = "straddles"
    elif threshold >= 1.0:
        verdict = "meets" if met == n else "misses"
    elif low >= threshold:
        verdict = "meets"
    elif high < threshold:
        verdict = "misses"
    else:
        verdict = "straddles"
    return Check(what, threshold, met, n, share, low, high, verdict)


@dataclass(frozen=True)
class Judgement:
    """A level's checks and its verdict (``judge``)."""

    verdict: Verdict
    #: the share of measured requests that met every bound, and its interval
    attainment: float | None
    low: float
    high: float
    checks: tuple[Check, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "attainment": self.attainment,
            "low": self.low,
            "high": self.high,
            "checks": [c.as_dict() for c in self.checks],
        }


def judge(counts: SLOCounts, slo: SLO) -> Judgement:
    """Whether a level meets ``slo`` (see the module docstring)."""
    checks = [
        check(b.name, met, counts.measured, counts.planned, b.threshold, slo.confidence)
        for b, met in zip(slo.bounds, counts.met_each, strict=True)
    ]
    joint = check(
        "all bounds", counts.met, counts.measured, counts.planned, slo.target or 0.0, slo.confidence
    )
    if slo.target is not None:
        checks.append(joint)
    verdicts = {c.verdict for c in checks}
    verdict: Verdict = (
        "misses" if "misses" in verdicts else "straddles" if "straddles" in verdicts else "meets"
    )
    return Judgement(verdict, counts.share, joint.low, joint.high, tuple(checks))


# ---------------------------------------------------------------- stopping a window early


def allowed_misses(planned: int, threshold: float, confidence: float) -> int:
    """The most misses a window of ``planned`` requests may hold and still not be judged ``misses``
    against ``threshold`` (its upper end, every other request counted as met, still reaches it)."""
    if threshold >= 1.0:
        return 0
    lo, hi = 0, planned  # the largest m with wilson_high(planned - m, planned) >= threshold
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if wilson(planned - mid, planned, confidence)[1] >= threshold:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class MissRule:
    """A window's miss allowances: per bound (in the SLO's order), and for every bound together (None:
    no target). Picklable: every client process of a level holds a copy (``loadgen.runner``)."""

    slo: SLO
    allowed_each: tuple[int, ...]
    allowed_all: int | None

    def misses(self, r: RequestRecord) -> tuple[tuple[bool, ...], bool]:
        each = tuple(not b.met_by(r) for b in self.slo.bounds)
        return each, any(each)


def miss_rule(slo: SLO, planned: int | None) -> MissRule | None:
    """The allowances of a window of ``planned`` requests; None for a window of a duration (no count)."""
    if planned is None:
        return None
    each = tuple(allowed_misses(planned, b.threshold, slo.confidence) for b in slo.bounds)
    joint = None if slo.target is None else allowed_misses(planned, slo.target, slo.confidence)
    return MissRule(slo, each, joint)


class MissCount:
    """A window's misses as its requests finish, against a ``MissRule``: ``over`` once one count passes
    its allowance (the window is then clearly over saturation)."""

    def __init__(self, rule: MissRule) -> None:
        self.rule = rule
        self.each = [0] * len(rule.allowed_each)
        self.all = 0

    def record(self, r: RequestRecord) -> bool:
        """Count ``r``; whether the window is now over its allowances."""
        each, joint = self.rule.misses(r)
        for i, missed in enumerate(each):
            self.each[i] += missed
        self.all += joint
        over_each = any(n > a for n, a in zip(self.each, self.rule.allowed_each, strict=True))
        over_all = self.rule.allowed_all is not None and self.all > self.rule.allowed_all
        return over_each or over_all
