"""The SLO (measure.slo): what a request meets, the shares a level is judged by and their Wilson
intervals, the verdict (meets, misses, straddles), and the misses a window tolerates before it is
clearly over saturation."""

from __future__ import annotations

import math

import pytest

from nova_search.measure.records import RequestRecord
from nova_search.measure.slo import (
    SLO,
    Bound,
    MissCount,
    SLOCounts,
    allowed_misses,
    check,
    count,
    judge,
    miss_rule,
    wilson,
)


def ok(send: float, chunks: list[tuple[float, int]]) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    tokens = tuple(n for _, n in chunks)
    return RequestRecord(send, times[-1], True, 8, sum(tokens), times, tokens)


FAILED = RequestRecord(0.0, 1.0, False, error="HTTP 500")
# TTFT 100 ms, then gaps of 50 ms and 200 ms over 1 and 2 tokens: TPOT 250 / 3, longest ITL 100 ms
R = ok(0.0, [(0.1, 1), (0.15, 1), (0.35, 2)])
ONE_TOKEN = ok(0.0, [(0.05, 1)])


def test_a_request_meets_a_bound_when_it_succeeded_and_its_latency_is_at_most_the_bound():
    assert Bound("ttft", 99, 100.0).met_by(R)  # inclusive
    assert not Bound("ttft", 99, 99.9).met_by(R)
    assert Bound("e2e", 50, 350.0).met_by(R) and not Bound("e2e", 50, 349.0).met_by(R)
    assert Bound("tpot", 90, 83.4).met_by(R) and not Bound("tpot", 90, 83.3).met_by(R)
    assert Bound("itl", 90, 100.0).met_by(R) and not Bound("itl", 90, 99.0).met_by(R)  # the longest gap
    # no decode phase: nothing for TPOT or ITL to bound; a failed request misses every bound
    assert Bound("tpot", 99, 0.001).met_by(ONE_TOKEN) and Bound("itl", 99, 0.001).met_by(ONE_TOKEN)
    assert not any(Bound(m, 50, 1e9).met_by(FAILED) for m in ("ttft", "tpot", "itl", "e2e"))


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"metric": "latency"}, "metric"),
        ({"percentile": 0.0}, "percentile"),
        ({"percentile": 100.5}, "percentile"),
        ({"max_ms": 0.0}, "max_ms"),
        ({"max_ms": math.inf}, "max_ms"),
    ],
)
def test_a_bad_bound_is_refused_naming_its_field(kw, field):
    args = {"metric": "ttft", "percentile": 99.0, "max_ms": 500.0} | kw
    with pytest.raises(ValueError, match=field):
        Bound(**args)


def test_an_slo_refuses_a_target_outside_0_1_and_no_bounds():
    b = (Bound("ttft", 99, 500.0),)
    for target in (0.0, 1.01, -0.5):
        with pytest.raises(ValueError, match="target"):
            SLO(b, target)
    with pytest.raises(ValueError, match="bounds"):
        SLO(())
    assert SLO(b, 1.0).target == 1.0


def test_wilson_interval_matches_the_closed_form():
    low, high = wilson(40, 40)
    assert low == pytest.approx(40 / (40 + 1.959964**2), rel=1e-6) and high == pytest.approx(1.0)
    low, high = wilson(8, 10)
    assert (low, high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(40, 40, 0.5)[0] > wilson(40, 40, 0.99)[0]  # less sure, narrower


def test_count_pools_every_bound_and_each_bound():
    slo = SLO((Bound("ttft", 90, 100.0), Bound("e2e", 90, 300.0)))
    c = count([R, ONE_TOKEN, FAILED], slo, planned=4)
    # R meets TTFT but not E2E (350 ms); ONE_TOKEN meets both; FAILED neither
    assert c == SLOCounts(measured=3, met=1, met_each=(2, 1), planned=4)
    assert c.share == pytest.approx(1 / 3)
    assert c.plus(c) == SLOCounts(6, 2, (4, 2), 8)


def test_the_verdict_reads_the_interval_against_the_threshold():
    meets = check("x", 40, 40, 40, 0.9, 0.95)  # [0.912, 1]
    assert meets.verdict == "meets" and meets.low >= 0.9
    straddles = check("x", 30, 30, 30, 0.9, 0.95)  # all met, but too few to tell: [0.886, 1]
    assert straddles.verdict == "straddles" and straddles.low < 0.9 <= straddles.high
    misses = check("x", 10, 40, 40, 0.9, 0.95)
    assert misses.verdict == "misses" and misses.high < 0.9


def test_a_threshold_of_one_is_judged_on_the_sample_itself():
    assert check("x", 40, 40, 40, 1.0, 0.95).verdict == "meets"
    assert check("x", 39, 40, 40, 1.0, 0.95).verdict == "misses"


def test_an_abandoned_window_is_judged_on_its_plan_never_on_requests_it_did_not_send():
    # 20 of 40 planned measured, all met: the 20 unsent count as missed for the lower end
    c = check("x", 20, 20, 40, 0.5, 0.95)
    assert c.of == 40 and c.low == pytest.approx(wilson(20, 40)[0]) and c.verdict == "straddles"
    # the window stopped at its allowance + 1 misses: even every unsent request met could not reach it
    planned, threshold = 40, 0.9
    allowed = allowed_misses(planned, threshold, 0.95)
    measured = allowed + 1
    abandoned = check("x", 0, measured, planned, threshold, 0.95)
    assert abandoned.verdict == "misses"
    # ... while one miss fewer, the same window complete, does not miss
    assert check("x", planned - allowed, planned, planned, threshold, 0.95).verdict != "misses"


def test_judge_combines_each_bound_and_the_target():
    slo = SLO((Bound("ttft", 50, 100.0), Bound("e2e", 50, 1000.0)), target=0.9)
    # every bound holds for half the requests, but only 20 of 40 meet both: the target misses
    j = judge(SLOCounts(40, 20, (40, 40), 40), slo)
    assert [c.verdict for c in j.checks] == ["meets", "meets", "misses"] and j.verdict == "misses"
    assert j.attainment == 0.5
    without_target = judge(SLOCounts(40, 20, (40, 40), 40), SLO(slo.bounds))
    assert without_target.verdict == "meets" and len(without_target.checks) == 2


def test_a_window_is_over_its_allowance_once_a_bound_misses_more_than_it_tolerates():
    slo = SLO((Bound("ttft", 90, 100.0),))
    rule = miss_rule(slo, planned=40)
    assert rule is not None and miss_rule(slo, None) is None  # a window of a duration has no count
    allowed = rule.allowed_each[0]
    assert 0 < allowed < 40 * 0.2
    misses = MissCount(rule)
    slow = ok(0.0, [(0.2, 1)])
    assert not any(misses.record(slow) for _ in range(allowed))
    assert misses.record(slow)  # one more: clearly over


def test_an_slo_round_trips_and_names_itself():
    slo = SLO((Bound("ttft", 99, 500.0), Bound("tpot", 90, 50.0)), target=0.95, confidence=0.9)
    assert SLO.from_dict(slo.as_dict()) == slo
    assert slo.name == "p99 ttft <= 500 ms and p90 tpot <= 50 ms, 0.95 of requests all of them"
