"""saturation.find_saturation: the knee of a sweep, with and without repeats, and its limiter."""

from __future__ import annotations

from typing import Any

import pytest

from nova_search.analysis import Saturation, find_saturation
from nova_search.measure.metrics import LevelResult
from tests.support.builders import level


def lv(concurrency: int, throughput: float, **engine: Any) -> LevelResult:
    """The shared builder's level; saturation reads its throughput and the engine's signals only."""
    return level(concurrency, throughput, ttft_p99=None, **engine)


QUIET = {"kv_cache_usage_peak": 0.4, "num_waiting_mean": 0.0, "preemptions": 0.0}


def sweep(*points: tuple[int, float], **engine: Any) -> list[LevelResult]:
    return [lv(c, t, **engine) for c, t in points]


# ---------------------------------------------------------------- where it saturates


def test_grows_through_the_last_level() -> None:
    s = find_saturation(sweep((1, 100), (2, 190), (4, 360), (8, 700), **QUIET))
    assert s.concurrency is None and s.limiter is None and s.output_throughput is None
    assert "still grows at the last level (concurrency 8)" in s.explanation


def test_knee_with_tolerance() -> None:
    levels = sweep((1, 100), (2, 190), (4, 360), (8, 370), (16, 372), **QUIET)
    s = find_saturation(levels)
    assert s.concurrency == 4 and s.output_throughput == 360
    assert s.limiter == "compute"
    assert "concurrency 4" in s.explanation and "compute-bound" in s.explanation


def test_level_order_does_not_matter() -> None:
    levels = sweep((8, 370), (1, 100), (16, 372), (4, 360), (2, 190), **QUIET)
    assert find_saturation(levels).concurrency == 4


def test_tolerance_sets_what_counts_as_growth() -> None:
    levels = sweep((1, 100), (2, 106), (4, 108), **QUIET)
    assert find_saturation(levels).concurrency == 2  # +6 % is growth, +1.9 % is not
    assert find_saturation(levels, tolerance=0.10).concurrency == 1
    assert find_saturation(levels, tolerance=0.0).concurrency is None


def test_a_slow_steady_climb_is_not_saturated_at_its_first_step() -> None:
    # +4 % per level (each step within 5 %), +17 % over the sweep: saturation only where no later
    # level is 5 % above
    levels = sweep((1, 100), (2, 104), (4, 108), (8, 112.5), (16, 117), **QUIET)
    assert find_saturation(levels).concurrency == 8


def test_a_dip_then_growth_is_not_saturation() -> None:
    levels = sweep((1, 100), (2, 200), (4, 190), (8, 400), **QUIET)
    assert find_saturation(levels).concurrency is None


def test_a_decline_after_the_peak_is_saturation() -> None:
    levels = sweep((1, 100), (2, 200), (4, 150), (8, 120), **QUIET)
    s = find_saturation(levels)
    assert s.concurrency == 2 and s.output_throughput == 200


def test_fewer_than_two_levels() -> None:
    assert find_saturation([]).concurrency is None
    one = find_saturation([lv(4, 100.0)])
    assert one.concurrency is None and "fewer than two levels" in one.explanation


def test_duplicate_levels_and_bad_tolerance_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        find_saturation(sweep((4, 1.0), (4, 2.0)))
    with pytest.raises(ValueError, match="tolerance"):
        find_saturation(sweep((1, 1.0), (2, 2.0)), tolerance=-0.1)


def test_zero_throughput_level() -> None:
    assert find_saturation(sweep((1, 0.0), (2, 50.0), **QUIET)).concurrency is None
    assert find_saturation(sweep((1, 0.0), (2, 0.0), **QUIET)).concurrency == 1


# ---------------------------------------------------------------- with repeats


def test_repeats_decide_by_the_measured_ci() -> None:
    # +8 % from 4 to 8: above the 5 % tolerance, but inside the noise of these repeats
    levels = sweep((1, 100), (2, 190), (4, 360), (8, 389), **QUIET)
    noisy = {
        1: [95.0, 100.0, 105.0, 98.0, 102.0],
        2: [180.0, 190.0, 200.0, 185.0, 195.0],
        4: [300.0, 360.0, 420.0, 330.0, 390.0],
        8: [320.0, 389.0, 460.0, 350.0, 430.0],
    }
    assert find_saturation(levels).concurrency is None  # by tolerance: still growing
    s = find_saturation(levels, repeats=noisy)
    assert s.concurrency == 4 and s.output_throughput == 360.0  # the median of the repeats


def test_tight_repeats_verify_a_small_gain() -> None:
    # +3 % from 4 to 8 is below the tolerance, but these repeats are tight enough to verify it
    levels = sweep((1, 100), (4, 360), (8, 371), **QUIET)
    tight = {4: [359.0, 360.0, 361.0, 360.5, 359.5], 8: [370.0, 371.0, 372.0, 370.5, 371.5]}
    assert find_saturation(levels).concurrency == 4
    assert find_saturation(levels, repeats=tight).concurrency is None


def test_too_few_repeats_fall_back_to_tolerance() -> None:
    levels = sweep((1, 100), (2, 200), (4, 204), **QUIET)
    two_each = {1: [90.0, 110.0], 2: [150.0, 250.0], 4: [150.0, 258.0]}
    s = find_saturation(levels, repeats=two_each)
    assert s.concurrency == 2 and s.output_throughput == 200.0  # medians 100, 200, 204


# ---------------------------------------------------------------- the limiter


def test_limiter_kv_cache_by_usage_or_preemptions() -> None:
    points = ((1, 100.0), (2, 190.0), (4, 195.0))
    full = [lv(c, t, kv_cache_usage_peak=0.95 if c >= 2 else 0.3, num_waiting_mean=2.0) for c, t in points]
    s = find_saturation(full)
    assert s.concurrency == 2 and s.limiter == "kv_cache" and "95%" in s.explanation
    preempted = [lv(c, t, kv_cache_usage_peak=0.6, preemptions=3.0 if c == 4 else 0.0) for c, t in points]
    s = find_saturation(preempted)
    assert s.limiter == "kv_cache" and "3 preemptions" in s.explanation


def test_limiter_reads_only_levels_at_and_after_saturation() -> None:
    levels = [
        lv(1, 100.0, kv_cache_usage_peak=0.99, num_waiting_mean=0.0, preemptions=5.0),  # before
        lv(2, 190.0, **QUIET),
        lv(4, 195.0, **QUIET),
    ]
    assert find_saturation(levels).limiter == "compute"


def test_limiter_queue() -> None:
    levels = [
        lv(1, 100.0, **QUIET),
        lv(2, 190.0, kv_cache_usage_peak=0.5, num_waiting_mean=0.0),
        lv(4, 192.0, kv_cache_usage_peak=0.5, num_waiting_mean=1.7, preemptions=0.0),
    ]
    s = find_saturation(levels)
    assert s.concurrency == 2 and s.limiter == "queue" and "max_num_seqs" in s.explanation


def test_limiter_unknown_without_engine_metrics() -> None:
    s = find_saturation(sweep((1, 100), (2, 101)))
    assert s.concurrency == 1 and s.limiter == "unknown"
    assert "no engine metrics" in s.explanation
    # KV usage alone cannot rule out a queue
    partial = find_saturation(sweep((1, 100), (2, 101), kv_cache_usage_peak=0.3))
    assert partial.limiter == "unknown" and "queue depth" in partial.explanation


def test_saturation_as_dict() -> None:
    s = find_saturation(sweep((1, 100), (2, 101), **QUIET))
    assert isinstance(s, Saturation)
    assert s.as_dict() == {
        "concurrency": 1,
        "output_throughput": 100.0,
        "limiter": "compute",
        "explanation": s.explanation,
    }
