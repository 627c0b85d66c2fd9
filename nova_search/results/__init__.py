"""The read side: a study's results, read once from storage and chosen between by one set of rules.

    records    TrialResult, StudyResults (frozen; decoded through ``schema``)
    decode     Optuna's records -> TrialResult / StudyResults
    load       load_results(name, url), results_of(study): reads, never creates tables
    select     objective_of, ranked, pareto_front, best_trials, top_trial, stock_trial, tuned_baseline
    verdict    verdict_of: the speculative verdict and deployment policy against the tuned baseline
    launch     Launch, launch_of_trial / launch_of_policy, deployable
    manifests  render: a launch as a vllm command, a compose service or k8s manifests
    export     export_study / export_launch: the export command's one rule set (CLI and API)
    serialize  trial_dict, study_dict (with schema_version), to_csv, dumps_json

The public Python API is ``nova_search.api``, a small facade over these.
"""
