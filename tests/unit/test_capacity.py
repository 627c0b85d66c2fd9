"""The capacity search (measure.capacity) on a server whose saturation point is known: doubling, then
bisection to the tolerance; ``none`` and ``indeterminate``; the trial figures it gives (capacity per
GPU, cost, energy), as objectives and constraints; and the spec that asks for it."""

from __future__ import annotations

import subprocess

import pytest

from nova_search import schema
from nova_search.engine.power import PowerSampler, parse_power, power_argv, power_reader
from nova_search.errors import SpecError
from nova_search.measure import objectives as obj
from nova_search.measure.capacity import Capacity, Probe, SearchPlan, next_load, price_for, usd_per_mtok
from nova_search.measure.energy import PowerSample, energy_j
from nova_search.measure.slo import SLO, Bound, SLOCounts, judge
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict

SLO_P90 = SLO((Bound("ttft", 90, 100.0),))
N = 100  # requests a probe


def probe(load: float, met: int, slo: SLO = SLO_P90) -> Probe:
    counts = SLOCounts(N, met, (met,), N)
    return Probe(load, counts, judge(counts, slo), 10.0, load * 0.5, load * 20.0, int(load * 200))


def knee_server(knee: float):
    """Every request meets the SLO up to ``knee``, a fifth of them past it."""
    return lambda load: probe(load, N if load <= knee else N // 5)


def search(plan: SearchPlan, server) -> Capacity:
    probes: list[Probe] = []
    while (load := next_load(probes, plan)) is not None:
        probes.append(server(load))
    return Capacity(SLO_P90, plan, tuple(probes), gpus=2, done=True)


def closed(**kw) -> SearchPlan:
    return SearchPlan(**({"unit": "concurrency", "start": 1.0, "floor": 1.0, "ceiling": 256.0} | kw))


@pytest.mark.parametrize("knee", [1, 5, 6, 37, 100, 255])
@pytest.mark.parametrize("tolerance", [0.001, 0.05, 0.2])
def test_the_bisection_finds_a_known_concurrency_within_its_tolerance(knee, tolerance):
    c = search(closed(tolerance=tolerance, max_probes=30), knee_server(knee))
    assert c.status == "found" and c.converged and c.above is not None
    lo, hi = c.load, c.above.load
    assert lo <= knee < hi and (hi - lo <= tolerance * lo or hi - lo == 1)
    if tolerance * knee < 1:  # adjacent concurrencies: the knee itself
        assert (lo, hi) == (knee, knee + 1)
    loads = [p.load for p in c.probes]
    first_miss = loads.index(next(x for x in loads if x > knee))
    assert loads[: first_miss + 1] == [
        2.0**i for i in range(first_miss + 1)
    ]  # 1, 2, 4, ... to the first miss


@pytest.mark.parametrize(("knee", "tolerance"), [(13.7, 0.05), (0.3, 0.1), (42.0, 0.02)])
def test_the_bisection_finds_a_known_rate_within_its_tolerance(knee, tolerance):
    plan = SearchPlan("rate", 2.0, 2.0 / 16, 1000.0, tolerance, 40)
    c = search(plan, knee_server(knee))
    assert c.status == "found" and c.converged
    lo, hi = c.load, c.above.load
    assert lo <= knee < hi and hi - lo <= tolerance * lo


def test_a_capacity_at_the_ceiling_says_it_may_carry_more():
    c = search(closed(ceiling=16.0, tolerance=0.1, max_probes=12), knee_server(1000))
    assert c.status == "found" and c.load == 16 and c.at_ceiling and c.above is None
    assert "ceiling" in c.text()


def test_an_slo_no_load_meets_gives_none_counted_as_zero():
    c = search(closed(start=8.0, tolerance=0.1, max_probes=12), lambda load: probe(load, 0))
    assert [p.load for p in c.probes] == [8, 4, 2, 1]  # halved down to the floor
    assert c.status == "none" and c.load is None
    assert c.capacity == 0.0 and c.capacity_per_gpu == 0.0
    assert c.cost_per_mtok is None and c.joules_per_token is None
    assert "none" in c.text() and "concurrency 1" in c.text()


def test_a_straddling_slo_gives_indeterminate_never_a_number():
    # 85 of 100 meet p90 at every load: the interval [0.77, 0.91] holds 0.9
    c = search(closed(tolerance=0.1, max_probes=12), lambda load: probe(load, 88))
    assert {p.verdict for p in c.probes} == {"straddles"}
    assert c.status == "indeterminate"
    assert c.figures() == dict.fromkeys(("capacity", "capacity_per_gpu", "cost_per_mtok", "joules_per_token"))
    assert "indeterminate" in c.text()


def test_max_probes_ends_the_search_and_says_the_bracket_is_wide():
    c = search(closed(tolerance=0.01, max_probes=5), knee_server(100))
    assert len(c.probes) == 5 and c.status == "found" and not c.converged
    assert "max_probes" in c.text()


def test_figures_cost_and_energy_at_capacity():
    at = Probe(
        6.0,
        SLOCounts(40, 40, (40,), 40),
        judge(SLOCounts(40, 40, (40,), 40), SLO_P90),
        2.0,
        30.0,
        600.0,
        1200,
        energy_j=900.0,
    )
    over = probe(7.0, 0)
    c = Capacity(
        SLO_P90, closed(tolerance=0.1, max_probes=12), (at, over), gpus=2, done=True, usd_per_gpu_hour=3.0
    )
    assert c.capacity == 30.0 and c.capacity_per_gpu == 15.0
    assert c.cost_per_mtok == pytest.approx(3.0 * 2 / (600.0 * 3600) * 1e6)
    assert c.joules_per_token == pytest.approx(900.0 / 1200) and c.mean_power_w == pytest.approx(450.0)
    assert usd_per_mtok(2.5, 1, 0.0) is None
    stored = schema.CAPACITY.read({schema.CAPACITY.key: schema.CAPACITY.encode(c)})
    assert stored is not None and stored.figures() == c.figures() and stored.as_dict() == c.as_dict()
    assert schema.CAPACITY.read({schema.CAPACITY.key: {"slo": "garbage"}}) is None  # never crashes a reader


def test_the_price_is_found_by_gpu_kind():
    prices = {"H100": 2.5, "H100 NVL": 3.0, "H200": 3.7, "cpu": 0.2}
    assert price_for(prices, "NVIDIA H100 80GB HBM3", True) == ("H100", 2.5)
    assert price_for(prices, "NVIDIA H100 NVL", True) == ("H100 NVL", 3.0)  # the longest key wins
    assert price_for(prices, "AMD EPYC 7B13", False) == ("cpu", 0.2)
    assert price_for(prices, "NVIDIA A100-SXM4-80GB", True) == (None, None)


def test_energy_is_integrated_over_the_window_only():
    # GPU 0 draws 100 W, GPU 1 300 W, sampled every 0.5 s from t=0 to 10; the window is [2, 6]
    samples = [PowerSample(t / 2, g, w) for t in range(21) for g, w in ((0, 100.0), (1, 300.0))]
    assert energy_j(samples, 2.0, 6.0) == pytest.approx(4 * 400.0)
    ramp = [PowerSample(float(t), 0, 100.0 * t) for t in range(11)]  # a ramp: the mean over [2.5, 4.5]
    assert energy_j(ramp, 2.5, 4.5) == pytest.approx(2.0 * 350.0)
    assert energy_j([], 0.0, 1.0) is None
    assert energy_j([PowerSample(0.0, 0, 100.0)], 5.0, 9.0, gap_s=1.0) is None  # no sample near the window


def test_power_is_read_from_nvidia_smi_and_absent_on_the_cpu():
    assert power_argv((0, 3)) == [
        "nvidia-smi",
        "--query-gpu=index,power.draw",
        "--format=csv,noheader,nounits",
        "-i",
        "0,3",
    ]
    assert parse_power("0, 312.50\n1, [N/A]\n2, 75\n") == {0: 312.5, 2: 75.0}
    reader, note = power_reader("cpu", ())
    assert reader is None and "absent, not zero" in note
    reader, note = power_reader("cuda", (1,), program="/nonexistent/nvidia-smi")
    assert reader is not None and "nvidia-smi" in note
    with pytest.raises(OSError):
        reader()


def test_a_sampler_keeps_timestamped_readings_and_says_why_when_there_are_none():
    readings = iter(range(1000))
    sampler = PowerSampler(lambda: {0: 100.0 + next(readings)}, interval_s=0.05).start()
    import time

    time.sleep(0.3)
    samples = sampler.stop()
    assert len(samples) >= 3 and all(s.gpu == 0 for s in samples)
    assert [s.time for s in samples] == sorted(s.time for s in samples) and sampler.problem is None

    def broken() -> dict[int, float]:
        raise subprocess.CalledProcessError(9, "nvidia-smi")

    failing = PowerSampler(broken, interval_s=0.05).start()
    assert failing.stop() == [] and "nvidia-smi gave no power reading" in (failing.problem or "")


# ---------------------------------------------------------------- objectives and constraints


def test_figures_are_objectives_and_constraints_without_a_level():
    figures = {"capacity_per_gpu": 12.5, "cost_per_mtok": None}
    o = obj.parse_objective("capacity_per_gpu")
    assert o.maximize and obj.objective_value((), o, figures) == 12.5
    assert not obj.parse_objective("cost_per_mtok").maximize
    assert obj.objective_value((), obj.parse_objective("cost_per_mtok"), figures) is None
    c = obj.parse_condition("capacity_per_gpu >= 10")
    assert c.figure and c.holds((), figures) and not c.holds((), {"capacity_per_gpu": 9.0})
    assert c.violation(()) == obj.UNDEFINED_VIOLATION  # without figures: undefined, infeasible
    for text in ("capacity_per_gpu@32", "capacity_per_gpu >= 1 @4"):
        with pytest.raises(SpecError, match="one figure per trial"):
            obj.parse_condition(text) if ">=" in text else obj.parse_objective(text)


def _spec(**changes):
    return parse_spec(minimal_spec_dict(**changes))


CAPACITY_OBJECTIVE = [{"metric": "capacity_per_gpu", "direction": "maximize"}]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"objectives": CAPACITY_OBJECTIVE}, "objectives.0.metric: capacity_per_gpu comes from the capacity"),
        ({"capacity": {}}, "capacity: the search judges each load by the SLO"),
        (
            {"slo": {"ttft_ms": 100}, "capacity": {"start": 2.5}},
            "capacity.start: 2.5 is not a concurrency",
        ),
        (
            {"slo": {"ttft_ms": 100}, "capacity": {"start": 4, "ceiling": 2}},
            "capacity: start (4) must lie between floor (0) and ceiling (2)",
        ),
        (
            {
                "slo": {"ttft_ms": 100},
                "capacity": {},
                "objectives": [{"metric": "cost_per_mtok", "direction": "minimize"}],
            },
            "cost_per_mtok needs a price: capacity.gpu_hour_usd",
        ),
        (
            {
                "slo": {"ttft_ms": 100},
                "capacity": {},
                "objectives": [{"metric": "joules_per_token", "direction": "minimize"}],
            },
            "joules_per_token needs the GPU's power draw",
        ),
        (
            {"slo": {"ttft_ms": 100}, "capacity": {}, "objectives": [CAPACITY_OBJECTIVE[0] | {"at": 1}]},
            "objectives.0: at: capacity_per_gpu is one figure per trial",
        ),
    ],
)
def test_a_capacity_spec_that_cannot_run_is_refused_naming_the_field(changes, message):
    with pytest.raises(SpecError) as e:
        _spec(**changes)
    assert message in str(e.value)


def test_a_capacity_spec_reads_bounds_in_both_forms_and_plans_by_arrival():
    spec = _spec(
        slo={
            "bounds": ["ttft p99 <= 500", {"metric": "tpot", "percentile": 90, "max_ms": 50}],
            "e2e_ms": 9000,
        },
        capacity={"ceiling": 32},
        objectives=CAPACITY_OBJECTIVE,
    )
    slo = spec.slo.to_slo()
    assert [b.name for b in slo.bounds] == ["p100 e2e <= 9000 ms", "p99 ttft <= 500 ms", "p90 tpot <= 50 ms"]
    assert spec.capacity.plan(spec.closed_loop) == SearchPlan("concurrency", 1.0, 1.0, 32.0, 0.1, 12)
    rate = _spec(
        slo={"bounds": ["e2e p50 <= 900"]},
        workload={"arrival": {"kind": "poisson", "rate": 4}},
        capacity={"start": 2.5},
    )
    assert rate.capacity.plan(rate.closed_loop) == SearchPlan("rate", 2.5, 2.5 / 16, 256.0, 0.1, 12)
