"""LevelResults -> objective values and Optuna constraint values (feasible when <= 0)."""

from __future__ import annotations

from typing import Any

import pytest

from nova_search.metrics import LevelResult
from nova_search.objectives import (
    UNDEFINED_VIOLATION,
    constraint_values,
    objective_value,
    objective_values,
)
from nova_search.spec import ConstraintSpec, ObjectiveSpec


def level(concurrency: int, **metrics: Any) -> LevelResult:
    base: dict[str, Any] = dict(
        requests=10,
        completed=10,
        errors=0,
        error_rate=0.0,
        duration_s=1.0,
        input_tokens=100,
        output_tokens=100,
        output_throughput=100.0,
        total_token_throughput=200.0,
        request_throughput=10.0,
    )
    return LevelResult(concurrency=concurrency, **{**base, **metrics})


LEVELS = [
    level(1, output_throughput=50.0, ttft_p99_ms=80.0, error_rate=0.0),
    level(4, output_throughput=180.0, ttft_p99_ms=300.0, error_rate=0.02),
    level(16, output_throughput=150.0, ttft_p99_ms=900.0, error_rate=0.10),
]


def obj(metric: str, direction: str, at: Any = "best") -> ObjectiveSpec:
    return ObjectiveSpec(metric=metric, direction=direction, at=at)


def con(text: str) -> ConstraintSpec:
    return ConstraintSpec.model_validate(text)


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
