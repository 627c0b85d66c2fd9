"""Capacity at the SLO: the search inside a trial, and what it found. Pure functions over records.

The load is the closed loop's concurrency (``unit`` concurrency) or the Poisson rate (``unit`` rate,
requests a second). Each ``Probe`` is one measurement window at one load, judged against the SLO
(``measure.slo.judge``: meets, misses or straddles).

- ``next_load(probes, plan)``: the load to measure next, or None when the search is done. The first
  probe is at ``start``; while the largest load that meets has nothing tried above it, the load doubles
  (up to ``ceiling``); while nothing meets, it halves (down to ``floor``); once a load that meets lies
  below one that does not (misses or straddles), the bracket is bisected until it is within
  ``tolerance`` of the lower end (closed loop: until the two concurrencies are adjacent), or
  ``max_probes`` were measured.
- ``capacity_of``: ``found`` (the largest load that meets: ``load``), ``none`` (nothing meets and
  nothing straddles: every load tried clearly misses), or ``indeterminate`` (nothing meets but some load
  straddles: whether it carries any load at the SLO cannot be told from these windows; never a number).
- Its figures (``CAPACITY_METRICS``): ``capacity`` (the requests a second the capacity probe completed),
  ``capacity_per_gpu`` (per GPU the server held), ``cost_per_mtok`` (``usd_per_mtok``: $ per million
  output tokens at capacity, from the price of a GPU-hour) and ``joules_per_token`` (the GPUs' energy
  over the capacity probe's window / its output tokens). ``none`` counts as 0 requests a second (the
  search may rank by it); ``indeterminate`` has no figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nova_search.measure.records import LevelRun
from nova_search.measure.slo import SLO, Judgement, SLOCounts, Verdict, count, judge

Unit = Literal["concurrency", "rate"]
Status = Literal["found", "none", "indeterminate"]

#: the trial figures a spec may name as objectives or constraints (one per trial, not per level)
CAPACITY_METRICS: tuple[str, ...] = ("capacity", "capacity_per_gpu", "cost_per_mtok", "joules_per_token")
#: the figures where lower is better
LOWER_IS_BETTER = frozenset({"cost_per_mtok", "joules_per_token"})


def usd_per_mtok(usd_per_gpu_hour: float, gpus: int, tok_s: float) -> float | None:
    """$ per million tokens: price x GPUs / (tok/s x 3600) x 1e6; None without throughput."""
    if not tok_s or tok_s <= 0 or not math.isfinite(tok_s):
        return None
    return usd_per_gpu_hour * max(gpus, 1) / (tok_s * 3600.0) * 1e6


@dataclass(frozen=True)
class SearchPlan:
    unit: Unit
    start: float
    floor: float
    ceiling: float
    tolerance: float
    max_probes: int

    @property
    def integer(self) -> bool:
        return self.unit == "concurrency"

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "start": self.start,
            "floor": self.floor,
            "ceiling": self.ceiling,
            "tolerance": self.tolerance,
            "max_probes": self.max_probes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchPlan:
        unit = d["unit"]
        if unit not in ("concurrency", "rate"):
            raise ValueError(f"unknown unit {unit!r}")
        return cls(
            unit,
            float(d["start"]),
            float(d["floor"]),
            float(d["ceiling"]),
            float(d["tolerance"]),
            int(d["max_probes"]),
        )


@dataclass(frozen=True)
class Probe:
    """One window at one load: its SLO counts and judgement, and what it carried."""

    load: float
    counts: SLOCounts
    judgement: Judgement
    duration_s: float
    #: completed requests a second, output tokens a second, output tokens in the window
    request_throughput: float
    output_throughput: float
    output_tokens: int
    #: the window was abandoned once clearly over saturation (``measure.slo.MissRule``)
    abandoned: bool = False
    #: the GPUs' energy over the window (J); None: not measured (``energy_note`` of the capacity says why)
    energy_j: float | None = None

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    def as_dict(self) -> dict[str, Any]:
        return {
            "load": self.load,
            "verdict": self.verdict,
            "counts": self.counts.as_dict(),
            "judgement": self.judgement.as_dict(),
            "duration_s": self.duration_s,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "output_tokens": self.output_tokens,
            "abandoned": self.abandoned,
            "energy_j": self.energy_j,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], slo: SLO) -> Probe:
        counts = SLOCounts.from_dict(d["counts"])
        energy = d.get("energy_j")
        return cls(
            load=float(d["load"]),
            counts=counts,
            judgement=judge(counts, slo),
            duration_s=float(d["duration_s"]),
            request_throughput=float(d["request_throughput"]),
            output_throughput=float(d["output_throughput"]),
            output_tokens=int(d["output_tokens"]),
            abandoned=bool(d.get("abandoned")),
            energy_j=None if energy is None else float(energy),
        )


def probe_of(load: float, run: LevelRun, slo: SLO, planned: int | None, energy: float | None = None) -> Probe:
    """One window at ``load`` -> its Probe: counted and judged against ``slo`` (``planned``: the
    requests the window meant to send; fewer measured: it was abandoned, clearly over saturation)."""
    counts = count(run.records, slo, planned)
    ok = [r for r in run.records if r.success]
    duration = max(run.window_end - run.window_start, 1e-9)
    tokens = sum(r.output_tokens for r in ok)
    return Probe(
        load=load,
        counts=counts,
        judgement=judge(counts, slo),
        duration_s=duration,
        request_throughput=len(ok) / duration,
        output_throughput=tokens / duration,
        output_tokens=tokens,
        abandoned=planned is not None and len(run.records) < planned,
        energy_j=energy,
    )


def _bracket(probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    """The largest load that meets, and the smallest load above it that does not (None: none)."""
    meets = [p.load for p in probes if p.verdict == "meets"]
    lo = max(meets) if meets else None
    above = [p.load for p in probes if p.verdict != "meets" and (lo is None or p.load > lo)]
    return lo, (min(above) if above else None)


def _round(load: float, plan: SearchPlan) -> float:
    return float(math.floor(load)) if plan.integer else float(f"{load:.4g}")


def next_load(probes: Sequence[Probe], plan: SearchPlan) -> float | None:
    """The load to measure next (see the module docstring); None: the search is done."""
    if not probes:
        return plan.start
    if len(probes) >= plan.max_probes:
        return None
    tried = {p.load for p in probes}
    lo, hi = _bracket(probes)
    if lo is None:  # nothing meets yet: down from the lowest load tried
        low = min(tried)
        nxt = max(plan.floor, _round(low / 2.0, plan))
        return None if nxt >= low or nxt in tried else nxt
    if hi is None:  # the largest load that meets has nothing above it: double
        nxt = min(plan.ceiling, _round(lo * 2.0, plan))
        return None if nxt <= lo or nxt in tried else nxt
    if hi - lo <= plan.tolerance * lo or (plan.integer and hi - lo <= 1):
        return None
    mid = _round((lo + hi) / 2.0, plan)
    return None if mid <= lo or mid >= hi or mid in tried else mid


@dataclass(frozen=True)
class Capacity:
    """What the search found so far (``done``: it has ended). See the module docstring."""

    slo: SLO
    plan: SearchPlan
    probes: tuple[Probe, ...]
    gpus: int
    done: bool = False
    #: the price of one GPU-hour used for the cost, and the spec's key it was found under
    usd_per_gpu_hour: float | None = None
    price_key: str | None = None
    #: why there is no cost, or where the price came from
    cost_note: str = ""
    #: why there is no energy (the CPU build, no nvidia-smi, no samples), or how it was measured
    energy_note: str = ""
    #: what else the search noted (a probe the server did not survive, ...)
    notes: tuple[str, ...] = field(default=())

    @property
    def status(self) -> Status:
        if any(p.verdict == "meets" for p in self.probes):
            return "found"
        if any(p.verdict == "straddles" for p in self.probes):
            return "indeterminate"
        return "none"

    @property
    def at(self) -> Probe | None:
        """The probe at capacity: the largest load that meets."""
        lo, _ = _bracket(self.probes)
        return next((p for p in self.probes if p.load == lo and p.verdict == "meets"), None)

    @property
    def load(self) -> float | None:
        at = self.at
        return at.load if at else None

    @property
    def above(self) -> Probe | None:
        """The smallest load above capacity that was tried and does not meet (None: none tried)."""
        _, hi = _bracket(self.probes)
        return next((p for p in self.probes if p.load == hi and p.verdict != "meets"), None)

    @property
    def at_ceiling(self) -> bool:
        """Capacity is the search's ceiling: the server may carry more."""
        return self.load is not None and self.load >= self.plan.ceiling

    @property
    def converged(self) -> bool:
        """The bracket is within the tolerance (or at the ceiling, or adjacent concurrencies)."""
        lo, hi = self.load, self.above.load if self.above else None
        if lo is None:
            return self.done
        if hi is None:
            return self.at_ceiling
        return hi - lo <= self.plan.tolerance * lo or (self.plan.integer and hi - lo <= 1)

    @property
    def capacity(self) -> float | None:
        """Requests a second carried at the SLO (0 for ``none``, None when indeterminate)."""
        at = self.at
        if at is not None:
            return at.request_throughput
        return 0.0 if self.status == "none" and self.probes else None

    @property
    def capacity_per_gpu(self) -> float | None:
        c = self.capacity
        return None if c is None else c / max(self.gpus, 1)

    @property
    def output_throughput(self) -> float | None:
        at = self.at
        return at.output_throughput if at else None

    @property
    def cost_per_mtok(self) -> float | None:
        tok_s = self.output_throughput
        if self.usd_per_gpu_hour is None or tok_s is None:
            return None
        return usd_per_mtok(self.usd_per_gpu_hour, self.gpus, tok_s)

    @property
    def joules_per_token(self) -> float | None:
        at = self.at
        if at is None or at.energy_j is None or at.output_tokens <= 0:
            return None
        return at.energy_j / at.output_tokens

    @property
    def mean_power_w(self) -> float | None:
        at = self.at
        if at is None or at.energy_j is None or at.duration_s <= 0:
            return None
        return at.energy_j / at.duration_s

    def figures(self) -> dict[str, float | None]:
        """The trial's figures by name (``CAPACITY_METRICS``)."""
        return {
            "capacity": self.capacity,
            "capacity_per_gpu": self.capacity_per_gpu,
            "cost_per_mtok": self.cost_per_mtok,
            "joules_per_token": self.joules_per_token,
        }

    def load_text(self, load: float | None) -> str:
        if load is None:
            return "–"
        return f"concurrency {load:g}" if self.plan.integer else f"{load:g} req/s offered"

    def text(self) -> str:
        """One line: what the search found."""
        slo = self.slo.name
        if self.status == "indeterminate":
            return (
                f"capacity indeterminate at {slo}: no load tried met it with confidence "
                f"{self.slo.confidence:g}, some straddle it (measure more requests a window)"
            )
        if self.status == "none":
            lowest = min((p.load for p in self.probes), default=None)
            return f"capacity none at {slo}: not even {self.load_text(lowest)} meets it"
        per_gpu = self.capacity_per_gpu or 0.0
        text = f"carries {per_gpu:.4g} req/s per GPU at {slo} ({self.load_text(self.load)}"
        above = self.above
        text += f"; {self.load_text(above.load)} {above.verdict})" if above else ")"
        if self.at_ceiling:
            text += " — the search's ceiling: it may carry more"
        elif self.done and not self.converged:
            text += " — the bracket is wider than the tolerance (capacity.max_probes reached)"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "done": self.done,
            "slo": self.slo.as_dict(),
            "plan": self.plan.as_dict(),
            "gpus": self.gpus,
            "load": self.load,
            **self.figures(),
            "output_throughput": self.output_throughput,
            "mean_power_w": self.mean_power_w,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "price_key": self.price_key,
            "cost_note": self.cost_note,
            "energy_note": self.energy_note,
            "notes": list(self.notes),
            "probes": [p.as_dict() for p in self.probes],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Capacity:
        slo = SLO.from_dict(dict(d["slo"]))
        price = d.get("usd_per_gpu_hour")
        return cls(
            slo=slo,
            plan=SearchPlan.from_dict(d["plan"]),
            probes=tuple(Probe.from_dict(p, slo) for p in d.get("probes") or ()),
            gpus=int(d.get("gpus") or 1),
            done=bool(d.get("done")),
            usd_per_gpu_hour=None if price is None else float(price),
            price_key=d.get("price_key"),
            cost_note=str(d.get("cost_note") or ""),
            energy_note=str(d.get("energy_note") or ""),
            notes=tuple(str(n) for n in d.get("notes") or ()),
        )


def price_for(
    prices: Mapping[str, float], device: str | None, on_gpu: bool
) -> tuple[str | None, float | None]:
    """The spec's price of a GPU-hour for ``device`` (the GPU's name as nvidia-smi gives it, or the
    CPU's): the longest key found in the name, case aside (``H100`` in ``NVIDIA H100 80GB HBM3``); on
    the CPU build, the key ``cpu`` also matches. (None, None) when no key matches."""
    name = (device or "").lower()
    keys = [k for k in prices if k.lower() in name or (not on_gpu and k.lower() == "cpu")]
    if not keys:
        return None, None
    key = max(keys, key=len)
    return key, float(prices[key])
