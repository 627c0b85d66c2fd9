"""LevelResults -> objective values and Optuna constraint values (feasible when <= 0), and the one
condition grammar that the spec's constraints and ``best --where`` share."""

from __future__ import annotations

from typing import Any

import pytest

from nova_search.errors import SpecError
from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import (
    UNDEFINED_VIOLATION,
    Condition,
    Objective,
    constraint_values,
    metric_at,
    objective_value,
    objective_values,
    parse_condition,
    parse_objective,
)
from nova_search.spec import ConstraintSpec, ObjectiveSpec
from tests.support import builders


def level(concurrency: int, **metrics: Any) -> LevelResult:
    return builders.level(concurrency, **{"ttft_p99": None, "output_throughput": 100.0, **metrics})


LEVELS = [
    level(1, output_throughput=50.0, ttft_p99_ms=80.0, error_rate=0.0),
    level(4, output_throughput=180.0, ttft_p99_ms=300.0, error_rate=0.02),
    level(16, output_throughput=150.0, ttft_p99_ms=900.0, error_rate=0.10),
]


def obj(metric: str, direction: str, at: Any = "best") -> ObjectiveSpec:
    return ObjectiveSpec(metric=metric, direction=direction, at=at)


def con(text: str) -> Condition:
    return ConstraintSpec.model_validate(text).condition


# ---------------------------------------------------------------- objectives


def test_best_maximize_takes_the_max() -> None:
    assert objective_value(LEVELS, obj("output_throughput", "maximize")) == 180.0


def test_best_minimize_takes_the_min() -> None:
    assert objective_value(LEVELS, obj("ttft_p99_ms", "minimize")) == 80.0


def test_at_a_level_takes_that_level() -> None:
    assert objective_value(LEVELS, obj("output_throughput", "maximize", 16)) == 150.0
    assert objective_value(LEVELS, obj("ttft_p99_ms", "minimize", 4)) == 300.0


def test_missing_level_is_none() -> None:
    assert objective_value(LEVELS, obj("output_throughput", "maximize", 8)) is None
    assert objective_value([], obj("output_throughput", "maximize")) is None


def test_undefined_metric_at_level_is_none() -> None:
    levels = [level(1, ttft_p99_ms=None), level(4, ttft_p99_ms=120.0)]
    assert objective_value(levels, obj("ttft_p99_ms", "minimize", 1)) is None
    # "best" skips the undefined level
    assert objective_value(levels, obj("ttft_p99_ms", "minimize")) == 120.0
    assert objective_value([level(1)], obj("ttft_p99_ms", "minimize")) is None


def test_objective_values_keeps_order() -> None:
    out = objective_values(
        LEVELS,
        [
            obj("output_throughput", "maximize"),
            obj("ttft_p99_ms", "minimize", 4),
            obj("ttft_p99_ms", "minimize", 2),
        ],
    )
    assert out == [180.0, 300.0, None]


def test_values_are_floats() -> None:
    v = objective_value(LEVELS, obj("completed", "maximize"))
    assert v == 10.0 and isinstance(v, float)


# ---------------------------------------------------------------- constraints


def test_le_constraint_at_level() -> None:
    c = con("ttft_p99_ms <= 500 at concurrency 4")
    out = constraint_values(LEVELS, [c])
    assert out == {"ttft_p99_ms<=500@4": pytest.approx(300.0 - 500.0)}
    assert out[c.name] <= 0  # feasible


def test_le_constraint_violated() -> None:
    out = constraint_values(LEVELS, [con("ttft_p99_ms <= 500 @16")])
    assert out["ttft_p99_ms<=500@16"] == pytest.approx(400.0)


def test_ge_constraint() -> None:
    out = constraint_values(LEVELS, [con("output_throughput >= 100 @4"), con("output_throughput >= 100 @1")])
    assert out["output_throughput>=100@4"] == pytest.approx(100.0 - 180.0)  # feasible
    assert out["output_throughput>=100@1"] == pytest.approx(100.0 - 50.0)  # infeasible


def test_every_takes_the_worst_level() -> None:
    out = constraint_values(
        LEVELS,
        [con("ttft_p99_ms <= 500"), con("output_throughput >= 100"), con("error_rate <= 0.05")],
    )
    assert out["ttft_p99_ms<=500@every"] == pytest.approx(900.0 - 500.0)
    assert out["output_throughput>=100@every"] == pytest.approx(100.0 - 50.0)
    assert out["error_rate<=0.05@every"] == pytest.approx(0.10 - 0.05)


def test_every_feasible_when_all_levels_are() -> None:
    out = constraint_values(LEVELS, [con("ttft_p99_ms <= 1000")])
    assert out["ttft_p99_ms<=1000@every"] == pytest.approx(900.0 - 1000.0)


def test_undefined_metric_is_a_large_violation() -> None:
    levels = [level(1, ttft_p99_ms=10.0), level(4, ttft_p99_ms=None)]
    out = constraint_values(
        levels,
        [con("ttft_p99_ms <= 500 @4"), con("ttft_p99_ms <= 500"), con("ttft_p99_ms <= 500 @1")],
    )
    assert out["ttft_p99_ms<=500@4"] == UNDEFINED_VIOLATION
    assert out["ttft_p99_ms<=500@every"] == UNDEFINED_VIOLATION  # one undefined level spoils it
    assert out["ttft_p99_ms<=500@1"] == pytest.approx(-490.0)
    assert UNDEFINED_VIOLATION > 0


def test_missing_level_is_a_large_violation() -> None:
    out = constraint_values(LEVELS, [con("ttft_p99_ms <= 500 @8")])
    assert out == {"ttft_p99_ms<=500@8": UNDEFINED_VIOLATION}
    assert constraint_values([], [con("ttft_p99_ms <= 500")]) == {
        "ttft_p99_ms<=500@every": UNDEFINED_VIOLATION
    }


def test_no_constraints() -> None:
    assert constraint_values(LEVELS, []) == {}


def test_strict_bounds_make_equality_a_violation() -> None:
    at_300 = [level(4, ttft_p99_ms=300.0)]
    assert constraint_values(at_300, [con("ttft_p99_ms <= 300 @4")])["ttft_p99_ms<=300@4"] == 0.0
    assert constraint_values(at_300, [con("ttft_p99_ms < 300 @4")])["ttft_p99_ms<300@4"] > 0.0
    assert constraint_values(at_300, [con("ttft_p99_ms < 300.001 @4")])["ttft_p99_ms<300.001@4"] <= 0.0
    assert constraint_values(at_300, [con("ttft_p99_ms > 300 @4")])["ttft_p99_ms>300@4"] > 0.0


def test_best_holds_at_the_level_most_in_its_favour() -> None:
    assert parse_condition("ttft_p99_ms <= 100 @best").holds(LEVELS)  # level 1 has 80
    assert not parse_condition("ttft_p99_ms <= 100").holds(LEVELS)  # every level: 900 at 16
    assert parse_condition("output_throughput >= 170 @best").holds(LEVELS)
    assert not parse_condition("output_throughput >= 190 @best").holds(LEVELS)


# ---------------------------------------------------------------- the grammar


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft_p99_ms<=500@32", Condition("ttft_p99_ms", "<=", 500.0, 32)),
        ("ttft_p99_ms <= 500 at concurrency 32", Condition("ttft_p99_ms", "<=", 500.0, 32)),
        ("  output_throughput >= 1e3 @ best ", Condition("output_throughput", ">=", 1000.0, "best")),
        ("error_rate<0.01", Condition("error_rate", "<", 0.01, "every")),
        ("error_rate<0.01 @every", Condition("error_rate", "<", 0.01, "every")),
        ("tpot_p50_ms>.5@4", Condition("tpot_p50_ms", ">", 0.5, 4)),
    ],
)
def test_parse_condition(text, expected):
    assert parse_condition(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("ttft_p99_ms=500@32", "write metric OP value"),
        ("ttft_p99_ms<=abc", "write metric OP value"),
        ("latency<=5@4", "unknown metric 'latency'"),
        ("ttft_p99_ms<=5@four", "is not a concurrency"),
        ("ttft_p99_ms<=5@0", "positive concurrency"),
        ("", "write metric OP value"),
    ],
)
def test_parse_condition_rejects(text, needle):
    with pytest.raises(SpecError, match=needle):
        parse_condition(text)


def test_the_spec_and_the_query_read_a_condition_the_same_way() -> None:
    for text in ("ttft_p99_ms <= 500 at concurrency 4", "error_rate < 0.01", "goodput >= 2 @best"):
        assert ConstraintSpec.model_validate(text).condition == parse_condition(text)
    assert str(parse_condition("ttft_p99_ms<=500@32")) == "ttft_p99_ms<=500@32"


def test_metric_at_best_uses_the_direction() -> None:
    assert metric_at(LEVELS, "ttft_p99_ms", "best") == 80.0  # latency: lower is better
    assert metric_at(LEVELS, "output_throughput", "best") == 180.0
    assert metric_at(LEVELS, "ttft_p99_ms", "best", maximize=True) == 900.0
    assert metric_at(LEVELS, "ttft_p99_ms", 16) == 900.0 and metric_at(LEVELS, "ttft_p99_ms", 2) is None


def test_parse_objective() -> None:
    objs = (Objective("output_throughput", "maximize", "best", 0), Objective("ttft_p99_ms", "minimize", 4, 1))
    assert parse_objective("output_throughput@best", objs) is objs[0]
    assert parse_objective("output_throughput", objs) is objs[0]  # a plain metric is @best
    o = parse_objective("ttft_p99_ms@1", objs)
    assert (o.metric, o.at, o.direction, o.index) == ("ttft_p99_ms", 1, "minimize", None)
    assert parse_objective("goodput@4").direction == "maximize"
    assert parse_objective("e2e_p99_ms@4").direction == "minimize"
    with pytest.raises(SpecError, match="unknown metric 'speed'"):
        parse_objective("speed@4", objs)
