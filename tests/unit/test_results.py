"""The read side without storage: decoding a trial, choosing between trials (the one definition of
the best trials and of the tuned baseline), serialization, and the status built from it."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, timedelta

import optuna
import pytest
from optuna.distributions import IntDistribution

from nova_search import schema
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.measure.objectives import Objective
from nova_search.report.status import status_lines
from nova_search.results.decode import trial_result
from nova_search.results.select import (
    best_trials,
    objective_of,
    pareto_front,
    ranked,
    stock_trial,
    top_trial,
    tuned_baseline,
)
from nova_search.results.serialize import (
    CSV_COLUMNS,
    DUMP_SCHEMA_VERSION,
    dumps_json,
    study_dict,
    to_csv,
    trial_dict,
)
from nova_search.results.standing import study_status
from tests.support.builders import OBJECTIVES, T0, level, study, trial

NGRAM = SpeculativeConfig("ngram", 3, prompt_lookup_min=2, prompt_lookup_max=4)


@pytest.fixture
def results():
    return study(
        trial(0, [level(1, 100, 10), level(4, 300, 40)], role="stock", config=EngineConfig()),
        trial(1, [level(1, 120, 9), level(4, 500, 30)]),  # best throughput
        trial(2, [level(1, 110, 5), level(4, 350, 12)]),  # best TTFT
        trial(3, [level(1, 90, 20), level(4, 200, 60)]),  # dominated
        trial(4, [level(1, 130, 9), level(4, 900, 10)], constraints={"slo": 3.0}),  # infeasible
        trial(5, [level(1, 1.0, None)], state="FAIL"),
        trial(6, [level(1, 140, 8), level(4, 950, 11)], config=EngineConfig(speculative=NGRAM)),
    )


# ---------------------------------------------------------------- selection


def test_objective_of_uses_the_stored_value_else_computes(results):
    t = results.trial(1)
    assert objective_of(t, OBJECTIVES[0]) == 500.0
    assert objective_of(t, Objective("ttft_p99_ms", "minimize", 1)) == 9  # not an objective: from levels
    assert objective_of(t, Objective("ttft_p99_ms", "minimize", 16)) is None
    assert objective_of(results.trial(5), OBJECTIVES[0]) is None  # FAIL: no stored value


def test_ranked_is_best_first_with_ties_to_the_lower_number():
    a, b = trial(3, [level(4, 500, 30)]), trial(2, [level(4, 500, 30)])
    assert [t.number for t in ranked([a, b], OBJECTIVES[0])] == [2, 3]
    assert [t.number for t in ranked([a, b, trial(1, [level(4, 10, 1)])], OBJECTIVES[1])] == [1, 2, 3]


def test_best_by_objective_takes_feasible_complete_only(results):
    (top,) = best_trials(results, objective="output_throughput@best")
    assert top.number == 6  # trial 4 has more throughput but violates its constraint
    (fast,) = best_trials(results, objective="ttft_p99_ms@4")
    assert fast.number == 6
    (low_c,) = best_trials(results, objective="ttft_p99_ms@1")  # not an objective: computed from levels
    assert low_c.number == 2
    assert top_trial(results).number == 6


def test_best_without_objective_is_the_pareto_front_sorted_by_first_objective(results):
    assert [t.number for t in best_trials(results)] == [6]
    plain = study(*(t for t in results.trials if t.number != 6))
    assert [t.number for t in best_trials(plain)] == [1, 2]
    # with conditions the front is recomputed among the trials that meet them
    assert [t.number for t in best_trials(plain, where=["ttft_p99_ms<=20@4"])] == [2]
    assert [t.number for t in best_trials(plain, where=["output_throughput>=301@4"])] == [1, 2]
    assert best_trials(plain, where=["ttft_p99_ms<=1@4"]) == []
    assert best_trials(plain, objective="output_throughput@best", where=["ttft_p99_ms<=20@4"])[0].number == 2
    # a condition on an unmeasured level excludes everyone
    assert best_trials(plain, objective="output_throughput@best", where=["ttft_p99_ms<=1e9@64"]) == []


def test_pareto_front_matches_definition(results):
    directions = ("maximize", "minimize")
    feasible = [t for t in results.trials if t.feasible and t.number != 6]
    assert [t.number for t in pareto_front(feasible, directions)] == [1, 2]
    # the infeasible trial 4 (900 tok/s, 10 ms) would dominate both
    everyone = [t for t in results.trials if t.values is not None and t.number != 6]
    assert [t.number for t in pareto_front(everyone, directions)] == [4]


def test_tuned_baseline_is_the_best_feasible_non_speculative_trial_at_the_objectives_at(results):
    # trial 6 is better but speculative, trial 4 better but infeasible
    assert tuned_baseline(results).number == 1
    assert stock_trial(results).number == 0
    # the first objective's `at` decides, not the metric's best level
    at1 = (Objective("output_throughput", "maximize", 1, 0), OBJECTIVES[1])
    r = study(
        *(trial(t.number, t.levels, role=t.role, objectives=at1) for t in results.trials[:4]), objectives=at1
    )
    assert tuned_baseline(r).number == 1  # 120 tok/s at concurrency 1
    at1_low = study(
        trial(0, [level(1, 200), level(4, 100)], objectives=at1),
        trial(1, [level(1, 150), level(4, 900)], objectives=at1),
        objectives=at1,
    )
    assert tuned_baseline(at1_low).number == 0


def test_stock_is_the_tuned_baseline_when_nothing_beat_it():
    r = study(
        trial(0, [level(4, 600, 40)], role="stock", config=EngineConfig()),
        trial(1, [level(4, 500, 30)]),
    )
    assert tuned_baseline(r).number == 0


def test_a_staged_study_quotes_gains_against_the_remeasured_tuned_trial():
    r = study(
        trial(0, [level(4, 300, 40)], role="stock", stage="tune"),
        trial(1, [level(4, 520, 30)], stage="tune"),
        trial(
            0, [level(4, 480, 31)], role="tuned", stage="speculative", config=EngineConfig(max_num_seqs=16)
        ),
        trial(
            1,
            [level(4, 700, 30)],
            stage="speculative",
            config=EngineConfig(max_num_seqs=16, speculative=NGRAM),
        ),
    )
    assert tuned_baseline(r).key == "speculative#0"
    assert [t.key for t in best_trials(r)] == ["speculative#1"]
    assert r.trial("speculative#1").method == "ngram"
    with pytest.raises(KeyError, match="several stages have it"):
        r.trial(1)


# ---------------------------------------------------------------- decoding


def test_trial_result_decodes_a_frozen_trial():
    argv = ["vllm", "serve", "/m", "--max-num-seqs", "8", "--host", "127.0.0.1", "--port", "9"]
    attrs = {
        **schema.ARGV.item(tuple(argv)),
        **schema.LEVELS.item((level(1, 120, 9), level(4, 500, 30))),
        **schema.CONFIG.item(EngineConfig(max_num_seqs=8)),
        **schema.ENGINE_VERSION.item("0.11.0"),
        **schema.TIMING.item({"boot_s": 3.0, "total_s": 9.5}),
        **schema.WORKER.item(schema.WorkerTag("n1", (0,))),
        **schema.REPEATS.item({4: ({"output_throughput": 490.0}, {"output_throughput": 510.0})}),
        **schema.WARNINGS.item(("client busy",)),
    }
    frozen = optuna.trial.create_trial(
        params={"max_num_seqs": 8},
        distributions={"max_num_seqs": IntDistribution(1, 256, log=True)},
        values=[500.0, 30.0],
        user_attrs=json.loads(json.dumps(attrs)),  # as storage hands it back
        system_attrs={"constraints:slo": 2.0},
    )
    t = trial_result(frozen)
    assert (t.state, t.role, t.values, t.params) == ("COMPLETE", "search", (500.0, 30.0), {"max_num_seqs": 8})
    assert t.constraints == {"slo": 2.0} and not t.feasible  # a violated constraint
    assert [lv.concurrency for lv in t.levels] == [1, 4] and t.level(4).output_throughput == 500
    assert t.config == EngineConfig(max_num_seqs=8)
    assert t.deployable_argv == ("vllm", "serve", "/m", "--max-num-seqs", "8")
    assert t.repeats == {4: (490.0, 510.0)} and t.warnings == ("client busy",)
    assert t.timing == {"boot_s": 3.0, "total_s": 9.5} and t.worker == schema.WorkerTag("n1", (0,))
    assert "max_num_seqs" in t.distributions
    # levels fall back to nova's table rows when the attribute is missing
    bare = optuna.trial.create_trial(values=[1.0, 2.0])
    rows = [{"profile": level(4, 7, 1).as_dict(), "argv": argv, "engine_version": "0.12.0"}]
    t = trial_result(bare, rows)
    assert [lv.output_throughput for lv in t.levels] == [7] and t.argv == tuple(argv)
    assert t.engine_version == "0.12.0" and t.feasible and t.config is None


def test_a_malformed_attribute_reads_as_missing():
    frozen = optuna.trial.create_trial(
        values=[1.0], user_attrs={schema.CONFIG.key: "not a mapping", schema.LEVELS.key: {"x": 1}}
    )
    t = trial_result(frozen)
    assert t.config is None and t.levels == ()


# ---------------------------------------------------------------- serialization


def test_trial_dict_is_json_ready(results):
    d = json.loads(dumps_json(trial_dict(results.trial(1), results.objectives)))
    assert d["values"] == {"output_throughput@best": 500.0, "ttft_p99_ms@4": 30.0}
    assert d["deployable_argv"][-2:] == ["--max-num-seqs", "16"]
    assert "--port" in d["argv"] and "--port" not in d["deployable_argv"]
    assert d["config"]["max_num_seqs"] == 16 and d["key"] == "1"
    # a naive (local) time is written in UTC, with its offset
    assert json.loads(dumps_json({"x": float("inf"), "t": T0})) == {
        "x": None,
        "t": T0.astimezone(UTC).isoformat(),
    }


def test_study_dict_has_a_schema_version(results):
    d = json.loads(dumps_json(study_dict(results)))
    assert d["schema_version"] == DUMP_SCHEMA_VERSION
    assert [t["key"] for t in d["trials"]] == [str(n) for n in range(7)]
    assert d["pareto"] == ["6"]


def test_csv_has_one_row_per_trial_and_level(results):
    rows = list(csv.DictReader(io.StringIO(to_csv(results))))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert len(rows) == sum(len(t.levels) for t in results.trials)
    six = [r for r in rows if r["key"] == "6"]
    assert [r["concurrency"] for r in six] == ["1", "4"]
    assert float(six[1]["output_throughput"]) == 950.0 and six[1]["spec_method"] == "ngram"
    assert six[1]["spec_k"] == "3" and six[0]["kv_cache_dtype"] == ""
    assert {"ttft_p95_ms", "ttft_std_ms", "e2e_min_ms", "itl_max_ms"} <= set(CSV_COLUMNS)


# ---------------------------------------------------------------- status (pure)


def test_status_counts_workers_best_and_eta():
    r = study(
        trial(
            0,
            [level(1, 100, 10), level(4, 300, 40)],
            role="stock",
            worker=("node1", (0,)),
            start_s=0,
            took_s=100,
        ),
        trial(1, [level(1, 120, 9), level(4, 500, 30)], worker=("node1", (1,)), start_s=0, took_s=200),
        trial(2, [level(4, 1, 1)], state="RUNNING", worker=("node1", (0,)), start_s=100),
        trial(3, [level(4, 1, 1)], state="RUNNING", worker=("node2", (0,)), start_s=250),
        budget=6,
    )
    now = T0 + timedelta(seconds=300)
    st = study_status(r, now=now)
    assert st.counts["COMPLETE"] == 2 and st.counts["RUNNING"] == 2
    assert st.active_slots == 2
    assert {(w.host, w.gpus, w.running_trial) for w in st.workers} == {
        ("node1", (0,), "2"),
        ("node1", (1,), None),
        ("node2", (0,), "3"),
    }
    assert [(b.objective, b.value, b.trial_number) for b in st.best] == [
        ("output_throughput@best", 500.0, "1"),
        ("ttft_p99_ms@4", 30.0, "1"),
    ]
    assert st.tuned == "1"
    assert st.mean_trial_s == 150.0
    # 2 remaining x 150 s, plus what is left of the running ones (0 and 100 s), over 2 slots
    assert st.remaining == 2
    assert st.eta_s == pytest.approx((2 * 150 + 0 + 100) / 2)
    text = "\n".join(status_lines(st, now=now))
    assert "COMPLETE 2" in text and "node2 [gpus 0]: running trial 3" in text and "ETA: 3m20s" in text
    assert "tuned baseline: trial 1" in text


def test_status_idle_and_done():
    r = study(trial(0, [level(4, 300, 40)], role="stock", worker=("h", ())), budget=1)
    st = study_status(r, now=T0 + timedelta(days=1))
    assert st.workers == () and st.eta_s == 0.0 and "done" in st.eta_note
    r = study(trial(0, [level(4, 300, 40)], role="stock", worker=("h", ())), budget=3)
    st = study_status(r, now=T0 + timedelta(days=1))
    assert st.eta_s is None and "no active worker" in st.eta_note
