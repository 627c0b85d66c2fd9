"""The SLO (what each request must meet: goodput counts it, the capacity search judges loads by it) and
the capacity search (how a trial finds the most load it carries at the SLO). Definitions: ``measure.slo``
and ``measure.capacity``; docs/metrics.md."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from nova_search.measure.capacity import SearchPlan
from nova_search.measure.slo import DEFAULT_CONFIDENCE, SLO, SLO_METRICS, Bound
from nova_search.spec._base import StrictModel
from nova_search.spec.workload import MAX_CONCURRENCY

#: ``ttft p99 <= 500`` (``ms`` optional), the string form of a bound
_BOUND_RE = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s+p(?P<pct>\d+(?:\.\d+)?)\s*<=\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:ms)?\s*$"
)
BOUND_FORMS = "write 'ttft p99 <= 500' (a latency, pNN, <=, milliseconds) or {metric, percentile, max_ms}"


class BoundSpec(StrictModel):
    """``percentile`` % of requests have ``metric`` at most ``max_ms``: ``ttft p99 <= 500`` or a mapping."""

    #: ttft, tpot, itl (a request's longest inter-token gap) or e2e
    metric: str
    #: the share of requests (%) that must meet the bound: in (0, 100]
    percentile: float = Field(gt=0, le=100)
    #: the latency bound in milliseconds: > 0
    max_ms: float = Field(gt=0, le=1e9)

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if not isinstance(data, str):
            return data
        m = _BOUND_RE.match(data)
        if not m:
            raise ValueError(f"cannot read the bound {data!r}; {BOUND_FORMS}")
        return {"metric": m["metric"], "percentile": float(m["pct"]), "max_ms": float(m["value"])}

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if v not in SLO_METRICS:
            raise ValueError(f"unknown latency {v!r}; valid: {', '.join(SLO_METRICS)}")
        return v

    @property
    def bound(self) -> Bound:
        return Bound(self.metric, self.percentile, self.max_ms)


class SLOSpec(StrictModel):
    """What each request must meet: a request meets the SLO when it meets every bound (goodput counts
    those); a level of load meets it when, with ``confidence``, each bound holds for its percentile of
    the requests and, with ``target``, that share of the requests meet every bound at once.

    The short fields (``ttft_ms``, ``tpot_ms``, ``e2e_ms``) are bounds at percentile 100: every request."""

    #: bounds a request must meet: 'ttft p99 <= 500' or {metric, percentile, max_ms}
    bounds: list[BoundSpec] = Field(default_factory=list, max_length=32)
    #: every request's time to first token at most this (ms): the bound 'ttft p100 <= X'
    ttft_ms: float | None = Field(default=None, gt=0, le=1e9)
    #: every request's time per output token at most this (ms): 'tpot p100 <= X'
    tpot_ms: float | None = Field(default=None, gt=0, le=1e9)
    #: every request's end-to-end latency at most this (ms): 'e2e p100 <= X'
    e2e_ms: float | None = Field(default=None, gt=0, le=1e9)
    #: the share of requests that must meet every bound at once, in (0, 1]; null: only each bound's own
    #: percentile
    target: float | None = Field(default=None, gt=0, le=1)
    #: how sure a level's verdict is: the level of the Wilson intervals the shares are read with
    confidence: float = Field(default=DEFAULT_CONFIDENCE, gt=0, lt=1)

    @model_validator(mode="after")
    def _some(self) -> SLOSpec:
        if not self.all_bounds():
            raise ValueError("give at least one bound (bounds, or one of ttft_ms, tpot_ms, e2e_ms)")
        return self

    def all_bounds(self) -> tuple[Bound, ...]:
        short = [
            Bound(metric, 100.0, v)
            for metric, v in (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2e", self.e2e_ms))
            if v is not None
        ]
        return tuple(short) + tuple(b.bound for b in self.bounds)

    def to_slo(self) -> SLO:
        return SLO(self.all_bounds(), self.target, self.confidence)


class CapacitySpec(StrictModel):
    """After the sweep, find the most load the trial's server carries at the SLO (``slo``): doubling,
    then bisection, one window a probe (``sweep.requests`` or ``sweep.duration_s``). The load is the
    concurrency in a closed loop, or the request rate when ``workload.arrival`` is poisson."""

    #: the first load measured: a concurrency (closed loop) or requests a second (poisson)
    start: float = Field(default=1.0, gt=0, le=1_000_000)
    #: the most load measured: the search's ceiling
    ceiling: float = Field(default=256.0, gt=0, le=1_000_000)
    #: the least load measured when the start misses the SLO (the search halves down to it); null: 1
    #: in a closed loop, start / 16 for a rate
    floor: float | None = Field(default=None, gt=0, le=1_000_000)
    #: the bisection stops once the bracket is within this share of its lower end (closed loop: also
    #: once the two concurrencies are adjacent)
    tolerance: float = Field(default=0.1, gt=0, le=1)
    #: the most probes (windows) one trial's search measures
    max_probes: int = Field(default=12, ge=1, le=64)
    #: poisson only: the most requests in flight during a probe; null: workload.arrival.max_in_flight,
    #: else 1024 (a low cap queues requests in the client, where their wait is not measured)
    max_in_flight: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)
    #: the price of one GPU-hour by GPU kind: a key found in the GPU's name (H100 in "NVIDIA H100 80GB
    #: HBM3"; the longest matching key wins), ``cpu`` for the CPU build; gives cost_per_mtok
    gpu_hour_usd: dict[
        Annotated[str, Field(min_length=1, max_length=64)], Annotated[float, Field(gt=0, le=1e6)]
    ] = Field(default_factory=dict, max_length=64)
    #: seconds between GPU power samples (nvidia-smi) during a probe's window: J/token
    power_interval_s: float = Field(default=0.2, ge=0.05, le=10)

    @model_validator(mode="after")
    def _order(self) -> CapacitySpec:
        floor = self.floor if self.floor is not None else 0.0
        if not floor <= self.start <= self.ceiling:
            raise ValueError(
                f"start ({self.start:g}) must lie between floor ({floor:g}) and ceiling ({self.ceiling:g})"
            )
        return self

    def plan(self, closed_loop: bool) -> SearchPlan:
        """The search plan: loads as concurrencies (closed loop) or rates."""
        floor = self.floor if self.floor is not None else (1.0 if closed_loop else self.start / 16.0)
        return SearchPlan(
            unit="concurrency" if closed_loop else "rate",
            start=self.start,
            floor=floor,
            ceiling=self.ceiling,
            tolerance=self.tolerance,
            max_probes=self.max_probes,
        )

    def closed_loop_problem(self) -> str | None:
        """Why this search cannot run a closed loop (a concurrency is a whole number of requests)."""
        for name in ("start", "ceiling", "floor"):
            v = getattr(self, name)
            if v is not None and (v != int(v) or v < 1 or v > MAX_CONCURRENCY):
                return (
                    f"capacity.{name}: {v:g} is not a concurrency (a whole number 1..{MAX_CONCURRENCY}); "
                    "in a closed loop the load is the requests in flight (workload.arrival poisson searches "
                    "a rate)"
                )
        if self.max_in_flight is not None:
            return "capacity.max_in_flight: only a poisson arrival takes it (a closed loop's load is its cap)"
        return None
