"""The public Python API: read a study's results and act on them. Everything here reads; nothing
writes to storage (Optuna's tables are never created by a read).

    from nova_search import api

    results = api.load_results("my-model", "postgresql+psycopg://nova@db/nova")
    tuned = api.tuned_baseline(results)                  # the one tuned trial every command names
    top = api.best_trials(results, objective="output_throughput@best",
                          where=["ttft_p99_ms <= 500 @32"])[0]
    verdict = api.verdict_of(results)                    # drafters, verified ranges, the policy
    answer = api.deploy_answer(results)                  # what to deploy: `policy`'s answer
    print(answer.ranges[0].command, answer.as_json()["schema_version"])
    print(api.export_study(results, "k8s", model="Qwen/Qwen3-8B").text)  # `nova-search export`'s rules

Storage errors raise ``StorageError`` (password masked); bad metric names and unreadable conditions
raise ``SpecError``. The modules behind this facade are listed in ``nova_search.results``.
"""

from __future__ import annotations

from nova_search.measure.objectives import Condition, Objective, parse_condition, parse_objective
from nova_search.results.deploy import DEPLOY_SCHEMA_VERSION, DeployAnswer, DeployRange, deploy_answer
from nova_search.results.export import Exported, export_launch, export_study
from nova_search.results.launch import Launch, deployable, launch_of_policy, launch_of_trial
from nova_search.results.load import load_results, results_of
from nova_search.results.manifests import EXPORT_FORMATS, render
from nova_search.results.select import (
    best_trials,
    objective_of,
    pareto_front,
    ranked,
    stock_trial,
    top_trial,
    tuned_baseline,
)
from nova_search.results.serialize import DUMP_SCHEMA_VERSION, dumps_json, study_dict, to_csv, trial_dict
from nova_search.results.speculation import verdict_of
from nova_search.results.trials import StudyResults, TrialResult

__all__ = [
    "DEPLOY_SCHEMA_VERSION",
    "DUMP_SCHEMA_VERSION",
    "EXPORT_FORMATS",
    "Condition",
    "DeployAnswer",
    "DeployRange",
    "Exported",
    "Launch",
    "Objective",
    "StudyResults",
    "TrialResult",
    "best_trials",
    "deploy_answer",
    "deployable",
    "dumps_json",
    "export_launch",
    "export_study",
    "launch_of_policy",
    "launch_of_trial",
    "load_results",
    "objective_of",
    "pareto_front",
    "parse_condition",
    "parse_objective",
    "ranked",
    "render",
    "results_of",
    "stock_trial",
    "study_dict",
    "to_csv",
    "top_trial",
    "trial_dict",
    "tuned_baseline",
    "verdict_of",
]
