"""nova_search.api without storage: conditions, objectives, selection (best_of, Pareto), export."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta

import pytest
import yaml

from nova_search.api import (
    Condition,
    Objective,
    StudyResults,
    TrialResult,
    best_of,
    dumps_json,
    export_launch,
    launch_parts,
    metric_value,
    pareto_front,
    parse_condition,
    resolve_objective,
    top_trial,
    trial_dict,
)
from nova_search.engine.command import deployable_argv
from nova_search.errors import NovaError, SpecError
from nova_search.metrics import LevelResult
from nova_search.status import status_lines, study_status

OBJECTIVES = (
    Objective("output_throughput@best", "output_throughput", "best", "maximize", 0),
    Objective("ttft_p99_ms@4", "ttft_p99_ms", 4, "minimize", 1),
)
T0 = datetime(2026, 1, 1, 12, 0, 0)


def level(c: int, tok_s: float, ttft_p99: float | None, **kw: float) -> LevelResult:
    return LevelResult(
        concurrency=c,
        requests=8,
        completed=8,
        errors=0,
        error_rate=0.0,
        duration_s=1.0,
        input_tokens=100,
        output_tokens=int(tok_s),
        output_throughput=tok_s,
        total_token_throughput=tok_s + 100,
        request_throughput=8.0,
        ttft_p99_ms=ttft_p99,
        **kw,
    )


def trial(
    number: int,
    levels: list[LevelResult],
    *,
    state: str = "COMPLETE",
    role: str = "search",
    constraints: dict[str, float] | None = None,
    argv: tuple[str, ...] | None = None,
    config: dict | None = None,
    worker: dict | None = None,
    start_s: float = 0.0,
    took_s: float | None = 60.0,
) -> TrialResult:
    values = None
    if state == "COMPLETE":
        lv4 = next(lv for lv in levels if lv.concurrency == 4)
        values = (max(lv.output_throughput for lv in levels), lv4.ttft_p99_ms)
    constraints = constraints or {}
    argv = argv or (
        "/usr/bin/python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/m",
        "--served-model-name",
        "m",
        "--max-num-seqs",
        str(8 * (number + 1)),
        "--host",
        "127.0.0.1",
        "--port",
        str(40000 + number),
    )
    start = T0 + timedelta(seconds=start_s)
    return TrialResult(
        number=number,
        state=state,
        role=role,
        params={"max_num_seqs": 8 * (number + 1)} if role != "stock" else {},
        config=config or {"max_num_seqs": 8 * (number + 1)},
        values=values,
        constraints=constraints,
        feasible=state == "COMPLETE" and all(v <= 0 for v in constraints.values()),
        levels=tuple(levels),
        argv=argv,
        deployable_argv=tuple(deployable_argv(argv)),
        engine_version="0.11.0",
        worker=worker,
        datetime_start=start,
        datetime_complete=None if took_s is None or state == "RUNNING" else start + timedelta(seconds=took_s),
    )


def results(*trials: TrialResult, pareto: tuple[int, ...] | None = None, budget: int = 6) -> StudyResults:
    complete = [t for t in trials if t.feasible]
    front = (
        pareto
        if pareto is not None
        else tuple(t.number for t in pareto_front(complete, ("maximize", "minimize")))
    )
    return StudyResults(
        study_name="s",
        storage="sqlite:///x.db",
        objectives=OBJECTIVES,
        trials=tuple(trials),
        pareto_numbers=front,
        spec={"budget": {"n_trials": budget}},
        budget_used=sum(1 for t in trials if t.state != "WAITING"),
    )


@pytest.fixture
def study() -> StudyResults:
    return results(
        trial(0, [level(1, 100, 10), level(4, 300, 40)], role="stock"),
        trial(1, [level(1, 120, 9), level(4, 500, 30)]),  # best throughput
        trial(2, [level(1, 110, 5), level(4, 350, 12)]),  # best TTFT
        trial(3, [level(1, 90, 20), level(4, 200, 60)]),  # dominated
        trial(4, [level(1, 130, 9), level(4, 900, 10)], constraints={"slo": 3.0}),  # infeasible
        trial(5, [level(1, 1.0, None)], state="FAIL"),
    )


# ---------------------------------------------------------------- conditions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft_p99_ms<=500@32", Condition("ttft_p99_ms", "<=", 500.0, 32)),
        ("  output_throughput >= 1e3 @ best ", Condition("output_throughput", ">=", 1000.0, "best")),
        ("error_rate<0.01", Condition("error_rate", "<", 0.01, None)),
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


def test_condition_holds_at_a_level_and_unmeasured_level_is_false(study):
    t1 = study.trial(1)
    assert parse_condition("ttft_p99_ms<=30@4").holds(t1)
    assert not parse_condition("ttft_p99_ms<30@4").holds(t1)
    assert not parse_condition("ttft_p99_ms<=1000@32").holds(t1)  # never measured at 32
    assert parse_condition("output_throughput>=500@best").holds(t1)
    # without a level every level must hold
    assert parse_condition("ttft_p99_ms<=30").holds(t1)
    assert not parse_condition("ttft_p99_ms<=10").holds(t1)
    # an undefined metric at the level is false
    assert not parse_condition("ttft_p99_ms<=1e9@1").holds(study.trial(5))
    assert str(parse_condition("ttft_p99_ms<=500@32")) == "ttft_p99_ms<=500@32"


def test_metric_value_best_uses_the_direction(study):
    t = study.trial(1)
    assert metric_value(t, "ttft_p99_ms", "best") == 9  # latency: lower is better
    assert metric_value(t, "output_throughput", "best") == 500
    assert metric_value(t, "ttft_p99_ms", "best", "maximize") == 30
    assert metric_value(t, "ttft_p99_ms", 16) is None


def test_resolve_objective():
    assert resolve_objective("output_throughput@best", OBJECTIVES) is OBJECTIVES[0]
    assert resolve_objective("output_throughput", OBJECTIVES) is OBJECTIVES[0]  # plain metric = @best
    o = resolve_objective("ttft_p99_ms@1", OBJECTIVES)
    assert (o.metric, o.at, o.direction, o.index) == ("ttft_p99_ms", 1, "minimize", None)
    assert resolve_objective("goodput@4").direction == "maximize"
    assert resolve_objective("e2e_p99_ms@4").direction == "minimize"
    with pytest.raises(SpecError, match="unknown metric 'speed'"):
        resolve_objective("speed@4", OBJECTIVES)


# ---------------------------------------------------------------- selection


def test_best_by_objective_takes_feasible_complete_only(study):
    (top,) = best_of(study, objective="output_throughput@best")
    assert top.number == 1  # trial 4 has more throughput but violates its constraint
    (fast,) = best_of(study, objective="ttft_p99_ms@4")
    assert fast.number == 2
    (low_c,) = best_of(study, objective="ttft_p99_ms@1")  # not an objective: computed from levels
    assert low_c.number == 2
    assert top_trial(study).number == 1


def test_best_without_objective_is_the_pareto_front_sorted_by_first_objective(study):
    front = best_of(study)
    assert [t.number for t in front] == [1, 2]
    # with conditions the front is recomputed among the trials that meet them
    assert [t.number for t in best_of(study, where=["ttft_p99_ms<=20@4"])] == [2]
    assert [t.number for t in best_of(study, where=["output_throughput>=301@4"])] == [1, 2]
    assert best_of(study, where=["ttft_p99_ms<=1@4"]) == []
    assert best_of(study, objective="output_throughput@best", where=["ttft_p99_ms<=20@4"])[0].number == 2
    # a condition on an unmeasured level excludes everyone
    assert best_of(study, objective="output_throughput@best", where=["ttft_p99_ms<=1e9@64"]) == []


def test_pareto_front_matches_definition(study):
    feasible = [t for t in study.trials if t.feasible]
    assert [t.number for t in pareto_front(feasible, ("maximize", "minimize"))] == [1, 2]
    # the infeasible trial 4 (900 tok/s, 10 ms) would dominate both
    everyone = [t for t in study.trials if t.values is not None]
    assert [t.number for t in pareto_front(everyone, ("maximize", "minimize"))] == [4]


# ---------------------------------------------------------------- export


def test_launch_parts_forms():
    assert launch_parts(["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--x", "1"]) == (
        ["py", "-m", "vllm.entrypoints.openai.api_server"],
        "/m",
        ["--x", "1"],
    )
    assert launch_parts(["vllm", "serve", "/m", "--x", "1", "--no-y"]) == (
        ["vllm", "serve"],
        "/m",
        ["--x", "1", "--no-y"],
    )
    assert launch_parts(["--x", "1"]) == ([], None, ["--x", "1"])


def test_export_vllm_is_the_deployable_argv_shell_quoted():
    t = trial(
        0,
        [level(4, 1, 1)],
        argv=(
            "vllm",
            "serve",
            "/models/my model",
            "--speculative-config",
            '{"method":"ngram","num_speculative_tokens":3}',
            "--host",
            "127.0.0.1",
            "--port",
            "1234",
        ),
    )
    line = export_launch(t, "vllm")
    assert shlex.split(line) == list(t.deployable_argv)
    assert "--host" not in line and "1234" not in line
    assert "'/models/my model'" in line


def test_export_compose_and_k8s_are_valid_yaml_with_gpus():
    t = trial(1, [level(4, 1, 1)], config={"tensor_parallel_size": 2})
    compose = yaml.safe_load(export_launch(t, "compose"))
    svc = compose["services"]["vllm"]
    assert svc["image"] == "vllm/vllm-openai:v0.11.0"
    assert svc["command"] == ["--model", "/models/m", "--served-model-name", "m", "--max-num-seqs", "16"]
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev == {"driver": "nvidia", "count": 2, "capabilities": ["gpu"]}
    k8s = yaml.safe_load(export_launch(t, "k8s", name="llm", image="my/vllm:1"))
    assert k8s["kind"] == "Deployment"
    (c,) = k8s["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "my/vllm:1" and c["name"] == "llm"
    assert c["args"] == svc["command"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2
    one = yaml.safe_load(export_launch(trial(2, [level(4, 1, 1)]), "k8s"))
    assert one["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_export_errors():
    with pytest.raises(SpecError, match="valid: vllm, compose, k8s"):
        export_launch(trial(0, [level(4, 1, 1)]), "helm")
    pruned = TrialResult(number=7, state="PRUNED", role="search")
    with pytest.raises(NovaError, match="no launch argv"):
        export_launch(pruned, "vllm")


def test_trial_dict_is_json_ready(study):
    d = json.loads(dumps_json(trial_dict(study.trial(1), study.objectives)))
    assert d["values"] == {"output_throughput@best": 500.0, "ttft_p99_ms@4": 30.0}
    assert d["deployable_argv"][-2:] == ["--max-num-seqs", "16"]
    assert "--port" in d["argv"] and "--port" not in d["deployable_argv"]
    assert json.loads(dumps_json({"x": float("inf"), "t": T0})) == {"x": None, "t": T0.isoformat()}


# ---------------------------------------------------------------- status (pure)


def test_status_counts_workers_best_and_eta():
    w = {"host": "node1", "gpus": [0]}
    r = results(
        trial(0, [level(1, 100, 10), level(4, 300, 40)], role="stock", worker=w, start_s=0, took_s=100),
        trial(
            1,
            [level(1, 120, 9), level(4, 500, 30)],
            worker={"host": "node1", "gpus": [1]},
            start_s=0,
            took_s=200,
        ),
        trial(2, [level(4, 1, 1)], state="RUNNING", worker=w, start_s=100),
        trial(3, [level(4, 1, 1)], state="RUNNING", worker={"host": "node2", "gpus": [0]}, start_s=250),
        budget=6,
    )
    now = T0 + timedelta(seconds=300)
    st = study_status(r, now=now)
    assert st.counts["COMPLETE"] == 2 and st.counts["RUNNING"] == 2
    assert st.active_slots == 2
    assert {(w.host, w.gpus, w.running_trial) for w in st.workers} == {
        ("node1", (0,), 2),
        ("node1", (1,), None),
        ("node2", (0,), 3),
    }
    assert [(b.objective, b.value, b.trial_number) for b in st.best] == [
        ("output_throughput@best", 500.0, 1),
        ("ttft_p99_ms@4", 30.0, 1),
    ]
    assert st.mean_trial_s == 150.0
    # 2 remaining x 150 s, plus what is left of the running ones (0 and 100 s), over 2 slots
    assert st.remaining == 2
    assert st.eta_s == pytest.approx((2 * 150 + 0 + 100) / 2)
    text = "\n".join(status_lines(st, now=now))
    assert "COMPLETE 2" in text and "node2 [gpus 0]: running trial 3" in text and "ETA: 3m20s" in text


def test_status_idle_and_done():
    r = results(trial(0, [level(4, 300, 40)], role="stock", worker={"host": "h", "gpus": []}), budget=1)
    st = study_status(r, now=T0 + timedelta(days=1))
    assert st.workers == () and st.eta_s == 0.0 and "done" in st.eta_note
    r = results(trial(0, [level(4, 300, 40)], role="stock", worker={"host": "h", "gpus": []}), budget=3)
    st = study_status(r, now=T0 + timedelta(days=1))
    assert st.eta_s is None and "no active worker" in st.eta_note


def test_trial_result_decodes_a_frozen_trial():
    import optuna
    from optuna.distributions import IntDistribution

    from nova_search.api import trial_result

    argv = ["vllm", "serve", "/m", "--max-num-seqs", "8", "--host", "127.0.0.1", "--port", "9"]
    frozen = optuna.trial.create_trial(
        params={"max_num_seqs": 8},
        distributions={"max_num_seqs": IntDistribution(1, 256, log=True)},
        values=[500.0, 30.0],
        user_attrs={
            "nova:argv": argv,
            "nova:levels": [level(1, 120, 9).as_dict(), level(4, 500, 30).as_dict()],
            "nova:config": {"max_num_seqs": 8},
            "nova:engine_version": "0.11.0",
            "nova:timing": {"boot_s": 3.0, "total_s": 9.5},
            "nova:worker": {"host": "n1", "gpus": [0]},
            "nova:repeats": {"4": [{"output_throughput": 490.0}, {"output_throughput": 510.0}]},
            "nova:warnings": ["client busy"],
        },
        system_attrs={"constraints:slo": 2.0},
    )
    t = trial_result(frozen)
    assert (t.state, t.role, t.values, t.params) == ("COMPLETE", "search", (500.0, 30.0), {"max_num_seqs": 8})
    assert t.constraints == {"slo": 2.0} and not t.feasible  # a violated constraint
    assert [lv.concurrency for lv in t.levels] == [1, 4] and t.level(4).output_throughput == 500
    assert t.deployable_argv == ("vllm", "serve", "/m", "--max-num-seqs", "8")
    assert t.repeats == {4: (490.0, 510.0)} and t.warnings == ("client busy",)
    assert t.timing == {"boot_s": 3.0, "total_s": 9.5} and t.worker == {"host": "n1", "gpus": [0]}
    assert "max_num_seqs" in t.distributions
    # levels fall back to nova's table rows when the attribute is missing
    bare = optuna.trial.create_trial(values=[1.0, 2.0])
    rows = [{"profile": level(4, 7, 1).as_dict(), "argv": argv, "engine_version": "0.12.0"}]
    t = trial_result(bare, rows)
    assert [lv.output_throughput for lv in t.levels] == [7] and t.argv == tuple(argv)
    assert t.engine_version == "0.12.0" and t.feasible
