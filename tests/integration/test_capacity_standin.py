"""Capacity at the SLO on the stand-in, whose saturation point is known: past ``knee_in_flight`` requests in
flight every delay stretches in proportion (in flight / knee), so with TTFT 100 ms, a knee of 4 and the
bound ``ttft p80 <= 165`` a closed loop of 6 meets it (150 ms) and 7 does not (175 ms). The search
finds 6 (the bracket 6..7 is within any tolerance: adjacent concurrencies); an SLO no load meets gives
``none``; one whose interval straddles its percentile gives ``indeterminate``; the GPU's power, read from
a stand-in nvidia-smi, becomes J/token over the window only. Then one study end to end through the CLI,
and bad SLO specs refused at ``create`` with nothing written."""

from __future__ import annotations

import json
import stat
import sys

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.loadgen.client import Target
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict
from nova_search.testing.standin import standin_server
from nova_search.trial.capacity_search import CapacityRun, search_capacity
from tests.support.cli import nova, nova_ok
from tests.support.contract import check_text

TTFT_S, KNEE = 0.1, 4
WORKLOAD = {"input_len": 8, "output_len": 4}
SWEEP = {"concurrency": [1], "requests": 40, "warmup_requests": 2, "client_processes": 1}
SLO_AT_6 = {"bounds": ["ttft p80 <= 165"]}


def _search(slo: dict, sweep: dict | None = None, capacity: dict | None = None, **spec_changes):
    where = spec_changes.pop("where", {})
    spec = parse_spec(
        minimal_spec_dict(
            workload=spec_changes.pop("workload", WORKLOAD),
            sweep=sweep or SWEEP,
            slo=slo,
            capacity=capacity or {"ceiling": 64},
            **spec_changes,
        )
    )
    with standin_server(ttft_s=TTFT_S, itl_s=0.002, knee_in_flight=KNEE, model="fake") as srv:
        return search_capacity(spec, CapacityRun(Target(srv.base_url, "fake", None), **where))


@pytest.mark.serial
def test_the_search_finds_the_known_saturation_point():
    c = _search(SLO_AT_6, capacity={"start": 2, "ceiling": 64})
    assert c.status == "found" and c.done and c.converged
    assert c.load == 6 and c.above is not None and c.above.load == 7 and c.above.verdict == "misses"
    # doubling to the first miss, then bisection: 2, 4, 8, then 6 and 7
    assert [p.load for p in c.probes] == [2, 4, 8, 6, 7]
    # loads over saturation were abandoned once clearly over, without sending all their requests
    over = [p for p in c.probes if p.load > 6]
    assert all(p.abandoned and p.counts.measured < 40 and p.verdict == "misses" for p in over)
    assert c.capacity == pytest.approx(c.at.request_throughput) and c.capacity > 6 / (TTFT_S * 2)
    assert c.cost_per_mtok is None and "no price" in c.cost_note
    assert c.joules_per_token is None and "absent, not zero" in c.energy_note


@pytest.mark.serial
def test_an_open_loop_search_brackets_a_rate_within_its_tolerance():
    c = _search(
        SLO_AT_6,
        sweep=SWEEP | {"requests": 30},
        capacity={"start": 16, "ceiling": 128, "tolerance": 0.25, "max_probes": 8},
        workload=WORKLOAD | {"arrival": {"kind": "poisson", "rate": 1}},
    )
    assert c.plan.unit == "rate" and c.status == "found" and c.load is not None
    above = c.above
    assert above is not None and above.load > c.load
    assert c.converged == (above.load - c.load <= 0.25 * c.load)
    assert c.converged or len(c.probes) == 8
    assert "req/s offered" in c.text()


def test_an_slo_no_load_meets_gives_none():
    c = _search({"bounds": ["ttft p50 <= 10"]}, capacity={"start": 2, "ceiling": 64})
    assert [p.load for p in c.probes] == [2, 1]  # halved down to the floor
    assert c.status == "none" and all(p.verdict == "misses" for p in c.probes)
    assert c.capacity == 0.0 and "not even concurrency 1 meets it" in c.text()


def test_an_slo_whose_interval_straddles_gives_indeterminate():
    # every request meets the bound, but 30 requests cannot show 90 % with 95 % confidence: [0.886, 1]
    c = _search(
        {"bounds": ["ttft p90 <= 1000"]},
        sweep=SWEEP | {"requests": 30},
        capacity={"start": 4, "floor": 4, "ceiling": 64},
    )
    assert [p.verdict for p in c.probes] == ["straddles"]
    assert c.probes[0].counts.met == 30
    assert c.status == "indeterminate" and c.capacity is None and c.figures()["capacity_per_gpu"] is None


def _fake_nvidia_smi(tmp_path, body: str):
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_gpu_power_becomes_joules_per_token_over_the_window_only(tmp_path):
    args = str(tmp_path / "args")
    program = _fake_nvidia_smi(
        tmp_path, f"import sys; open({args!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n'); print('3, 250.0')"
    )
    c = _search(
        {"bounds": ["ttft p80 <= 1000"]},
        sweep=SWEEP | {"requests": 20},
        capacity={"start": 2, "ceiling": 2, "gpu_hour_usd": {"H100": 2.0}},
        engine=minimal_spec_dict()["engine"] | {"device": "cuda"},
        where={"gpu_ids": (3,), "device_name": "NVIDIA H100 80GB HBM3", "power_program": program},
    )
    assert c.status == "found" and c.load == 2 and c.at_ceiling
    at = c.at
    assert at.energy_j == pytest.approx(250.0 * at.duration_s, rel=1e-6)  # a constant 250 W, the window only
    assert c.joules_per_token == pytest.approx(250.0 * at.duration_s / at.output_tokens, rel=1e-6)
    assert c.mean_power_w == pytest.approx(250.0) and "nvidia-smi" in c.energy_note
    assert c.price_key == "H100" and c.cost_per_mtok == pytest.approx(
        2.0 / (at.output_throughput * 3600) * 1e6
    )
    assert "-i 3" in (tmp_path / "args").read_text().splitlines()[0]


def test_a_failing_nvidia_smi_leaves_the_energy_absent_and_says_why(tmp_path):
    program = _fake_nvidia_smi(
        tmp_path, "import sys; print('NVIDIA-SMI has failed', file=sys.stderr); sys.exit(9)"
    )
    c = _search(
        {"bounds": ["ttft p80 <= 1000"]},
        sweep=SWEEP | {"requests": 20},
        capacity={"start": 4, "ceiling": 4},
        engine=minimal_spec_dict()["engine"] | {"device": "cuda"},
        where={"power_program": program},
    )
    assert c.status == "found" and c.joules_per_token is None and c.at.energy_j is None
    assert "nvidia-smi gave no power reading" in c.energy_note


# ---------------------------------------------------------------- through the command line


@pytest.mark.serial
def test_a_study_stores_capacity_per_gpu_as_its_objective_and_shows_it(tmp_path):
    raw = minimal_spec_dict(
        name="cap",
        workload=WORKLOAD,
        sweep={"concurrency": [4], "requests": 40, "warmup_requests": 2},
        slo=SLO_AT_6,
        capacity={"start": 4, "ceiling": 64, "gpu_hour_usd": {"cpu": 0.5}},
        objectives=[{"metric": "capacity_per_gpu", "direction": "maximize"}],
        constraints=["capacity_per_gpu >= 1"],
    )
    raw["engine"]["env"] |= {"FAKE_ENGINE_TTFT_S": str(TTFT_S), "FAKE_ENGINE_KNEE": str(KNEE)}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (t,) = optuna.load_study(study_name="cap", storage=url).get_trials()
    c = schema.CAPACITY.read(t.user_attrs)
    assert c is not None and c.done and c.status == "found" and c.load == 6
    assert t.values == [pytest.approx(c.capacity_per_gpu)]
    assert t.user_attrs[schema.TIMING.key]["capacity_s"] > 0
    assert c.cost_per_mtok == pytest.approx(0.5 / (c.output_throughput * 3600) * 1e6)
    rows = [json.loads(line) for line in (tmp_path / "art" / "cap" / "trial-0000" / "requests.jsonl").open()]
    assert {row["capacity_load"] for row in rows if "capacity_load" in row} == {4, 6, 7, 8}
    status = nova_ok("status", "cap", "--storage", url)
    assert "capacity at the SLO:" in status
    assert (
        "stock / tuned / best (trial 0): carries" in status
        and "(concurrency 6; concurrency 7 misses)" in status
    )
    assert "this config carries" in status  # the deploy answer
    # the new keys keep the JSON contract (check-jsonschema, formats checked)
    for name, argv in (
        ("dump", ("dump", "cap", "--storage", url)),
        ("status", ("status", "cap", "--storage", url, "--format", "json")),
        ("policy", ("policy", "cap", "--storage", url, "--format", "json")),
    ):
        doc = check_text(name, nova_ok(*argv), tmp_path, name)
    assert doc["ranges"][0]["configuration"]["capacity"] is not None


def test_an_objective_on_an_indeterminate_capacity_fails_the_trial_saying_so(tmp_path):
    raw = minimal_spec_dict(
        name="undecided",
        workload=WORKLOAD,
        sweep={"concurrency": [4], "requests": 30, "warmup_requests": 2},
        slo={"bounds": ["ttft p90 <= 1000"]},  # every request meets it, but 30 cannot show 90 %
        capacity={"start": 4, "floor": 4, "ceiling": 64},
        objectives=[{"metric": "capacity_per_gpu", "direction": "maximize"}],
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), timeout=600)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]  # nothing measured that completed
    (t,) = optuna.load_study(study_name="undecided", storage=url).get_trials()
    assert t.state == optuna.trial.TrialState.FAIL and t.values is None  # no made-up number
    assert t.user_attrs[schema.REASON.key] == "indeterminate"
    assert "capacity indeterminate at p90 ttft <= 1000 ms" in t.user_attrs[schema.MESSAGE.key]
    c = schema.CAPACITY.read(t.user_attrs)
    assert c is not None and c.done and [p.verdict for p in c.probes] == ["straddles"]


BAD_SLOS = [
    (
        {"bounds": [{"metric": "latency", "percentile": 99, "max_ms": 500}]},
        "slo.bounds.0.metric: unknown latency",
    ),
    ({"bounds": [{"metric": "ttft", "percentile": 0, "max_ms": 500}]}, "slo.bounds.0.percentile"),
    ({"bounds": [{"metric": "ttft", "percentile": 100.5, "max_ms": 500}]}, "slo.bounds.0.percentile"),
    ({"bounds": ["ttft p99 <= 0"]}, "slo.bounds.0.max_ms"),
    ({"bounds": ["ttft p99 <= 500"], "target": 0}, "slo.target"),
    ({"bounds": ["ttft p99 <= 500"], "target": 1.5}, "slo.target"),
]


@pytest.mark.parametrize(("slo", "field"), BAD_SLOS)
def test_a_bad_slo_is_refused_at_create_naming_the_field_and_nothing_is_written(tmp_path, slo, field):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(minimal_spec_dict(slo=slo, capacity={})))
    db = tmp_path / "s.db"
    r = nova("create", str(spec), "--storage", f"sqlite:///{db}")
    assert r.returncode == 2, r.stdout + r.stderr
    assert field in r.stderr
    assert not db.exists()
