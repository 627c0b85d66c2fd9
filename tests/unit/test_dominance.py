"""The early-stop rule (analysis/dominance.py): what stops a trial after a level, and what never does."""

from __future__ import annotations

import optuna

from nova_search import schema
from nova_search.analysis.dominance import Finished, broken_constraint, dominates, early_stop
from nova_search.knobs import EngineConfig
from nova_search.measure.objectives import Objective, parse_condition
from nova_search.trial.sweep import finished_of_kind
from tests.support.builders import level

TPUT = Objective("output_throughput", "maximize", "best")
TTFT_AT_4 = Objective("ttft_p99_ms", "minimize", 4)
OBJECTIVES = (TPUT, TTFT_AT_4)


def test_a_trial_beaten_by_more_than_the_margin_everywhere_so_far_stops() -> None:
    leader = Finished(3, (level(1, 200.0, 10.0), level(4, 600.0, 20.0)))
    mine = [level(1, 100.0, 30.0)]
    stop = early_stop(mine, [leader], OBJECTIVES, [], margin=0.05, min_levels=1)
    assert stop is not None and stop.reason == "dominated" and stop.by == 3 and stop.concurrency == 1
    assert "trial 3" in stop.message and "concurrency 1" in stop.message and "5%" in stop.message


def test_the_margin_and_every_objective_must_be_beaten() -> None:
    mine = [level(1, 100.0, 30.0)]
    # 4 % faster is inside a 5 % margin
    assert dominates((level(1, 104.0, 10.0),), mine, OBJECTIVES, 0.05) is None
    # faster but with a worse TTFT: not dominated
    assert dominates((level(1, 200.0, 40.0),), mine, OBJECTIVES, 0.05) is None
    # a finished trial that did not measure the level cannot judge it
    assert dominates((level(2, 900.0, 1.0),), mine, OBJECTIVES, 0.05) is None


def test_every_level_so_far_must_be_beaten() -> None:
    # ahead at 1, behind at 2: a profile that crosses is never stopped
    leader = (level(1, 200.0, 5.0), level(2, 150.0, 5.0), level(4, 600.0, 5.0))
    mine = [level(1, 100.0, 10.0), level(2, 300.0, 10.0)]
    assert dominates(leader, mine, OBJECTIVES, 0.05) is None


def test_an_objective_at_a_measured_level_is_compared_there_alone() -> None:
    # ttft@4 is final once 4 is measured: a worse TTFT at 1 does not save it, a better one at 4 would
    leader = (level(1, 200.0, 50.0), level(4, 600.0, 10.0))
    mine = [level(1, 100.0, 5.0), level(4, 300.0, 20.0)]
    assert dominates(leader, mine, OBJECTIVES, 0.05) is not None
    mine_better_at_4 = [level(1, 100.0, 5.0), level(4, 300.0, 9.0)]
    assert dominates(leader, mine_better_at_4, OBJECTIVES, 0.05) is None


def test_min_levels_holds_off_the_dominance_rule_but_not_a_broken_constraint() -> None:
    leader = Finished(0, (level(1, 200.0, 1.0), level(4, 600.0, 1.0)))
    mine = [level(1, 100.0, 30.0)]
    assert early_stop(mine, [leader], OBJECTIVES, [], 0.05, min_levels=2) is None
    slo = parse_condition("ttft_p99_ms <= 20")
    stop = early_stop(mine, [leader], OBJECTIVES, [slo], 0.05, min_levels=2)
    assert stop is not None and stop.reason == "constraint"
    assert "ttft_p99_ms<=20@every fails at concurrency 1" in stop.message


def test_only_constraints_no_later_level_can_mend_are_judged_early() -> None:
    mine = [level(1, 100.0, 30.0)]
    assert broken_constraint(mine, [parse_condition("ttft_p99_ms <= 20 @ best")]) is None
    assert broken_constraint(mine, [parse_condition("ttft_p99_ms <= 20 @ 4")]) is None  # 4 not measured
    assert broken_constraint(mine, [parse_condition("ttft_p99_ms <= 40 @ 1")]) is None
    assert "at concurrency 1" in (broken_constraint(mine, [parse_condition("ttft_p99_ms <= 20 @ 1")]) or "")
    # a metric undefined at a measured level breaks an every-level condition
    assert "undefined" in (
        broken_constraint([level(1, 100.0, None)], [parse_condition("ttft_p99_ms <= 20")]) or ""
    )


def test_no_finished_trial_no_stop() -> None:
    assert early_stop([level(1, 1.0, 1e6)], [], OBJECTIVES, [], 0.05, 1) is None
    assert early_stop([], [], OBJECTIVES, [], 0.05, 1) is None


def test_a_trial_is_judged_only_against_finished_feasible_trials_of_its_kind() -> None:
    study = optuna.create_study(directions=["maximize"])
    kinds = {
        0: EngineConfig(max_num_seqs=8),
        1: EngineConfig.from_dict({"speculative": {"method": "ngram", "num_speculative_tokens": 3}}),
        2: EngineConfig(max_num_seqs=16),
    }
    for number, config in kinds.items():
        t = study.ask()
        schema.CONFIG.write(t, config)
        schema.LEVELS.write(t, (level(1, 100.0 * (number + 1)),))
        t.set_constraint("slo", 1.0 if number == 2 else -1.0)  # trial 2 is infeasible
        study.tell(t, [100.0 * (number + 1)])
    current = study.ask()
    # a drafter's lead never stops a non-speculative trial: the tuned baseline is always measured whole
    assert [f.number for f in finished_of_kind(current, speculative=False)] == [0]
    assert [f.number for f in finished_of_kind(current, speculative=True)] == [1]
