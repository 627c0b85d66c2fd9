"""The deploy answer in one line (``report.policy.answer_summary``), the last thing ``run`` prints:
one configuration with its command, each load range with its trial, or why there is nothing yet."""

from __future__ import annotations

from nova_search.report.policy import answer_summary, deploy_what
from nova_search.results.deploy import deploy_answer
from nova_search.results.speculation import verdict_of
from tests.support.builders import full_report_study


def test_the_summary_is_one_line_naming_every_range_and_its_trial() -> None:
    results = full_report_study()
    answer = deploy_answer(results, verdict_of(results))
    line = answer_summary(answer)
    assert "\n" not in line and line.startswith("What to deploy")
    assert answer.ranges
    for r in answer.ranges:
        assert f"trial {r.configuration.trial}" in line and deploy_what(r) in line
    if len(answer.ranges) == 1 or not answer.switches_by_load:
        assert line.endswith(answer.ranges[0].command)


def test_one_configuration_ends_with_its_command_and_none_says_why() -> None:
    results = full_report_study()
    answer = deploy_answer(results, verdict_of(results))
    one = answer.model_copy(update={"ranges": answer.ranges[:1], "switches_by_load": False})
    r = one.ranges[0]
    assert answer_summary(one).endswith(
        f": {r.command}"
    ) and f"trial {r.configuration.trial}" in answer_summary(one)
    empty = answer.model_copy(
        update={"ranges": (), "reason": "no feasible COMPLETE non-speculative trial yet"}
    )
    assert (
        answer_summary(empty)
        == "What to deploy: nothing yet (no feasible COMPLETE non-speculative trial yet)"
    )
