"""A level measured in several windows: counts summed, figures as medians, error rate over all."""

from __future__ import annotations

import pytest

from nova_search.measure.metrics import LevelResult, combine_repeats


def window(tput: float, ttft: float | None, errors: int = 0, requests: int = 10) -> LevelResult:
    return LevelResult(
        concurrency=4,
        requests=requests,
        completed=requests - errors,
        errors=errors,
        error_rate=errors / requests,
        duration_s=2.0,
        input_tokens=100,
        output_tokens=50,
        output_throughput=tput,
        total_token_throughput=3 * tput,
        request_throughput=5.0,
        ttft_p99_ms=ttft,
        first_errors=["boom"] if errors else [],
        spec_accepted_per_pos=[0.9, 0.5],
    )


def test_single_window_is_returned_as_is():
    w = window(100.0, 20.0)
    assert combine_repeats([w]) is w


def test_medians_sums_and_error_rate():
    combined = combine_repeats([window(100.0, 20.0), window(300.0, None, errors=2), window(200.0, 40.0)])
    assert combined.concurrency == 4
    assert combined.output_throughput == 200.0
    assert combined.ttft_p99_ms == pytest.approx(30.0)  # median of the windows that have it
    assert combined.requests == 30 and combined.errors == 2 and combined.output_tokens == 150
    assert combined.error_rate == pytest.approx(2 / 30)
    assert combined.duration_s == pytest.approx(6.0)
    assert combined.first_errors == ["boom"]
    assert combined.spec_accepted_per_pos == [0.9, 0.5]
    assert combined.tpot_p50_ms is None
