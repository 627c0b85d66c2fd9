"""Objectives and conditions over a trial's levels: one definition each, pure functions.

- ``metric_at(levels, metric, at)``: a metric at one concurrency level, or at ``best`` (its best level);
  ``value_at`` is the same rule over (concurrency, value) pairs.
- ``Objective``: a metric, a direction and a level (``metric@at``). ``objective_value`` is *the* value of
  an objective: what a worker tells Optuna, and what every reader computes for a metric that is not
  one of the study's objectives.
- ``Condition``: ``metric OP value [@ level]``, the one grammar of the spec's ``constraints`` and of
  ``best --where``. OP is ``<=``, ``>=``, ``<`` or ``>``; the level is a concurrency, ``every`` (every
  measured level must hold; the default) or ``best`` (the level most in the condition's favour: it
  holds at some level). ``at concurrency N`` reads as ``@N``.
- ``violation`` follows Optuna's convention for constraints: feasible when <= 0. ``<=`` gives
  ``value - bound``, ``>=`` gives ``bound - value``; a strict bound is moved one float step inwards,
  so equality is a violation. A level that was not measured, or a metric undefined there, is
  ``UNDEFINED_VIOLATION``. ``holds`` is ``violation <= 0``: a query and a constraint agree.
- A trial figure (``measure.capacity.CAPACITY_METRICS``: ``capacity_per_gpu``, ``cost_per_mtok``, ...)
  is one value per trial, not per level: an objective or a condition on it takes no level, and reads
  it from the trial's ``figures`` (``Capacity.figures``); without them it is undefined.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from nova_search.errors import SpecError
from nova_search.measure.capacity import CAPACITY_METRICS
from nova_search.measure.metrics import METRIC_NAMES, LevelResult, higher_is_better

Direction = Literal["maximize", "minimize"]
Op = Literal["<=", ">=", "<", ">"]
OPS: tuple[Op, ...] = ("<=", ">=", "<", ">")

#: the constraint value for a level where the metric is undefined (nothing completed): infeasible
UNDEFINED_VIOLATION = 1e12
#: a trial's figures by name (``Capacity.figures``); None where the trial has none
Figures = Mapping[str, float | None]
#: every metric an objective or a condition may name: the levels' and the trial figures
KNOWN_METRICS: tuple[str, ...] = METRIC_NAMES + CAPACITY_METRICS


def is_figure(metric: str) -> bool:
    """Whether ``metric`` is a trial figure (one value per trial, not per level)."""
    return metric in CAPACITY_METRICS


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def metric_at(
    levels: Iterable[LevelResult], metric: str, at: int | str, maximize: bool | None = None
) -> float | None:
    """``metric`` at concurrency ``at`` (None when that level was not measured or the metric is
    undefined there), or at ``best``: the best value over the levels, higher or lower as ``maximize``
    says (the metric's natural direction when None)."""
    up = higher_is_better(metric) if maximize is None else maximize
    return value_at([(lv.concurrency, getattr(lv, metric, None)) for lv in levels], at, up)


def value_at(by_level: Iterable[tuple[int, Any]], at: int | str, maximize: bool) -> float | None:
    """One figure per level, (concurrency, value) -> the value at concurrency ``at`` (None when that
    level is missing or its value is not a finite number), or at ``best``: the best of them."""
    if at == "best":
        vals = [v for _, x in by_level if (v := _number(x)) is not None]
        if not vals:
            return None
        return max(vals) if maximize else min(vals)
    for c, x in by_level:
        if c == int(at):
            return _number(x)
    return None


class ObjectiveLike(Protocol):
    metric: str
    direction: str
    at: Any


def objective_value(
    levels: Sequence[LevelResult], o: ObjectiveLike, figures: Figures | None = None
) -> float | None:
    """The value of objective ``o`` for a trial that measured ``levels`` (and found ``figures``)."""
    if is_figure(o.metric):
        return _number((figures or {}).get(o.metric))
    return metric_at(levels, o.metric, o.at, o.direction == "maximize")


def objective_values(
    levels: Sequence[LevelResult], objectives: Sequence[ObjectiveLike], figures: Figures | None = None
) -> list[float | None]:
    return [objective_value(levels, o, figures) for o in objectives]


@dataclass(frozen=True)
class Objective:
    """One objective as a study holds it (``name`` = ``metric@at``); ``index`` is its position in a
    trial's values, None for a metric that is not an objective of the study."""

    metric: str
    direction: Direction
    at: int | Literal["best"] = "best"
    index: int | None = None

    @property
    def name(self) -> str:
        return f"{self.metric}@{self.at}"

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"


def _known(metric: str, what: str) -> str:
    if metric not in KNOWN_METRICS:
        raise SpecError(f"{what}: unknown metric {metric!r}; valid: {', '.join(KNOWN_METRICS)}")
    return metric


def _no_level(metric: str, at: int | str, what: str) -> None:
    """A trial figure takes no concurrency level."""
    if is_figure(metric) and isinstance(at, int):
        raise SpecError(
            f"{what}: {metric} is one figure per trial (at the SLO, from the capacity search), not per "
            "level: leave the level out"
        )


def _level(text: str, what: str, allowed: tuple[str, ...]) -> int | str:
    text = text.strip()
    if text in allowed:
        return text
    try:
        at = int(text)
    except ValueError:
        raise SpecError(
            f"{what}: the level {text!r} is not a concurrency (an integer) nor {' / '.join(allowed)}"
        ) from None
    if at <= 0:
        raise SpecError(f"{what}: the level must be a positive concurrency (got {at})")
    return at


def parse_objective(text: str, objectives: Sequence[Objective] = ()) -> Objective:
    """``output_throughput@best``, ``ttft_p99_ms@32`` or a plain metric (``@best``) -> an Objective.

    A name of one of the study's ``objectives`` is that objective (its direction, its index); any
    other metric takes the direction of a study objective on the same metric, else its natural one."""
    name = text.strip()
    for o in objectives:
        if o.name == name:
            return o
    metric, _, at_text = name.partition("@")
    what = f"objective {text!r}"
    _known(metric.strip(), what + " (give metric@level, e.g. output_throughput@best or ttft_p99_ms@32)")
    at = _level(at_text or "best", what, ("best",))
    _no_level(metric.strip(), at, what)
    for o in objectives:
        if o.name == f"{metric.strip()}@{at}":
            return o
    same = [o for o in objectives if o.metric == metric.strip()]
    direction: Direction = (
        same[0].direction if same else ("maximize" if higher_is_better(metric.strip()) else "minimize")
    )
    return Objective(metric.strip(), direction, at)  # type: ignore[arg-type]


# ---------------------------------------------------------------- conditions

_CONDITION_RE = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"\s*(?:(?:@|at\s+concurrency\b|at\b)\s*(?P<at>\S+))?\s*$"
)
FORMS = (
    "write metric OP value [@level], e.g. 'ttft_p99_ms <= 500 @32' or 'ttft_p99_ms <= 500 at concurrency 32' "
    "(OP one of <=, >=, <, >; level a concurrency, every (the default) or best)"
)


@dataclass(frozen=True)
class Condition:
    """``metric OP value @ level``; see the module docstring for what each part means."""

    metric: str
    op: Op
    value: float
    at: int | Literal["every", "best"] = "every"

    @property
    def name(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}@{self.at}"

    def __str__(self) -> str:
        return self.name

    @property
    def figure(self) -> bool:
        """Whether it bounds a trial figure (not a level metric)."""
        return is_figure(self.metric)

    def violation(self, levels: Sequence[LevelResult], figures: Figures | None = None) -> float:
        return violation(levels, self, figures)

    def holds(self, levels: Sequence[LevelResult], figures: Figures | None = None) -> bool:
        return violation(levels, self, figures) <= 0.0


def make_condition(metric: str, op: str, value: float, at: int | str = "every", what: str = "") -> Condition:
    """A checked Condition: known metric, known op, finite value, a valid level. SpecError otherwise."""
    what = what or f"condition {metric}{op}{value}"
    _known(metric, what)
    if op not in OPS:
        raise SpecError(f"{what}: the operator {op!r} is not one of {', '.join(OPS)}")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{what}: the bound must be a finite number (got {value!r})")
    level = (
        at if isinstance(at, int) and not isinstance(at, bool) else _level(str(at), what, ("every", "best"))
    )
    if isinstance(level, int) and level <= 0:
        raise SpecError(f"{what}: the level must be a positive concurrency (got {level})")
    _no_level(metric, level, what)
    return Condition(metric, op, float(value), level)  # type: ignore[arg-type]


def parse_condition(text: str | Condition) -> Condition:
    """Read ``metric OP value [@level]`` (see the module docstring). Raises SpecError naming what is
    wrong and the valid forms."""
    if isinstance(text, Condition):
        return text
    m = _CONDITION_RE.match(text or "") if isinstance(text, str) else None
    if not m:
        raise SpecError(f"cannot read condition {text!r}; {FORMS}")
    return make_condition(m["metric"], m["op"], float(m["value"]), m["at"] or "every", f"condition {text!r}")


def _one(value: float | None, c: Condition) -> float:
    if value is None:
        return UNDEFINED_VIOLATION
    if c.op == "<=":
        return value - c.value
    if c.op == "<":
        return value - math.nextafter(c.value, -math.inf)
    if c.op == ">=":
        return c.value - value
    return math.nextafter(c.value, math.inf) - value


def level_violation(level: LevelResult, c: Condition) -> float:
    """``c``'s violation at one level, whatever level ``c`` names: <= 0 when its metric holds there
    (a trial figure is undefined at a level)."""
    return _one(_number(getattr(level, c.metric, None)), c)


def violation(levels: Sequence[LevelResult], c: Condition, figures: Figures | None = None) -> float:
    """Optuna's constraint value of ``c`` over ``levels`` (a trial figure: from ``figures``): <= 0 when
    it holds."""
    if c.figure:
        return _one(_number((figures or {}).get(c.metric)), c)
    if c.at == "every":
        if not levels:
            return UNDEFINED_VIOLATION
        return max(level_violation(lv, c) for lv in levels)
    if c.at == "best":
        # the level most in the condition's favour: the lowest value for <, <=, the highest for >, >=
        return _one(metric_at(levels, c.metric, "best", maximize=c.op in (">=", ">")), c)
    return _one(metric_at(levels, c.metric, c.at), c)


def constraint_values(
    levels: Sequence[LevelResult], conditions: Sequence[Condition], figures: Figures | None = None
) -> dict[str, float]:
    """Each condition's violation by its name (what a worker stores with ``trial.set_constraint``)."""
    return {c.name: violation(levels, c, figures) for c in conditions}
