"""Builders of the records tests hand to pure code: a LevelResult, a TrialResult, a StudyResults.

Values follow the records' own rules, not a copy of them: a COMPLETE trial's objective values are
``objectives.objective_value`` of its levels, feasibility is Optuna's (every constraint <= 0), and a
study's Pareto front is ``results.select.pareto_front`` of its feasible trials unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from optuna.distributions import CategoricalDistribution, IntDistribution, distribution_to_json

from nova_search.knobs import EngineConfig
from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import Objective, objective_value
from nova_search.results.select import pareto_front
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.schema import WorkerTag

T0 = datetime(2026, 1, 1, 12, 0, 0)
#: the objectives most builders use: throughput at its best level, TTFT p99 at concurrency 4
OBJECTIVES = (
    Objective("output_throughput", "maximize", "best", 0),
    Objective("ttft_p99_ms", "minimize", 4, 1),
)


def level(c: int, tok_s: float = 100.0, ttft_p99: float | None = 10.0, **kw: Any) -> LevelResult:
    """A level with every latency filled in (mean/p99 derived from ``c``), overridable by ``kw``."""
    base: dict[str, Any] = dict(
        concurrency=c,
        requests=10,
        completed=10,
        errors=0,
        error_rate=0.0,
        duration_s=2.0,
        input_tokens=100,
        output_tokens=int(tok_s * 2),
        output_throughput=tok_s,
        total_token_throughput=tok_s + 50,
        request_throughput=5.0,
        ttft_mean_ms=None if ttft_p99 is None else ttft_p99 / 2,
        ttft_p99_ms=ttft_p99,
        tpot_mean_ms=10.0 + c,
        tpot_p99_ms=20.0 + c,
        itl_mean_ms=9.0 + c,
        itl_p99_ms=30.0 + c,
        e2e_mean_ms=500.0 + c,
        e2e_p99_ms=900.0 + c,
    )
    base.update(kw)
    return LevelResult(**base)


def launch_argv(number: int, model: str = "/models/m", **flags: Any) -> tuple[str, ...]:
    """A stored launch argv (nova's own launcher, host and port included)."""
    out = ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    out += ["--served-model-name", "m", "--max-num-seqs", str(8 * (number + 1))]
    for k, v in flags.items():
        out += [f"--{k.replace('_', '-')}", str(v)]
    return (*out, "--host", "127.0.0.1", "--port", str(40000 + number))


def trial(
    number: int,
    levels: Sequence[LevelResult] = (),
    *,
    state: str = "COMPLETE",
    role: str = "search",
    objectives: Sequence[Objective] = OBJECTIVES,
    constraints: dict[str, float] | None = None,
    config: EngineConfig | dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    argv: tuple[str, ...] | None = None,
    worker: WorkerTag | tuple[str, tuple[int, ...]] | None = None,
    start_s: float | None = None,
    took_s: float | None = 60.0,
    stage: str = "joint",
    **kw: Any,
) -> TrialResult:
    """A trial; ``config`` may be an EngineConfig or its dict (default: max_num_seqs = 8 (number + 1))."""
    values = None
    if state == "COMPLETE":
        computed = [objective_value(list(levels), o) for o in objectives]
        values = tuple(float(v) if v is not None else float("nan") for v in computed)
    constraints = constraints or {}
    if config is None:
        config = EngineConfig(max_num_seqs=8 * (number + 1))
    elif isinstance(config, dict):
        config = EngineConfig.from_dict(config)
    if params is None:
        params = {} if role == "stock" else {"max_num_seqs": config.max_num_seqs or 8}
    start = T0 + timedelta(seconds=start_s if start_s is not None else 60 * number)
    if isinstance(worker, tuple):
        worker = WorkerTag(*worker)
    return TrialResult(
        number=number,
        state=state,
        role=role,
        params=params,
        config=config,
        values=values,
        constraints=constraints,
        feasible=state == "COMPLETE" and all(v <= 0 for v in constraints.values()),
        levels=tuple(levels),
        argv=argv if argv is not None else launch_argv(number),
        engine_version="0.11.0",
        worker=worker,
        datetime_start=start,
        datetime_complete=None if took_s is None or state == "RUNNING" else start + timedelta(seconds=took_s),
        stage=stage,
        study="s" if stage == "joint" else f"s.{stage}",
        **kw,
    )


def study(
    *trials: TrialResult,
    objectives: Sequence[Objective] = OBJECTIVES,
    front: Sequence[str] | None = None,
    budget: int = 6,
    spec: dict[str, Any] | None = None,
    name: str = "s",
) -> StudyResults:
    """A study of ``trials``; its front is the feasible trials' Pareto front unless given (as keys)."""
    feasible = [t for t in trials if t.feasible]
    keys = (
        front
        if front is not None
        else [t.key for t in pareto_front(feasible, [o.direction for o in objectives])]
    )
    return StudyResults(
        study_name=name,
        storage="sqlite:///x.db",
        objectives=tuple(objectives),
        trials=tuple(trials),
        front_keys=tuple(keys),
        spec=spec if spec is not None else {"budget": {"n_trials": budget}},
        budget_used=sum(1 for t in trials if t.state != "WAITING"),
        stages=tuple(dict.fromkeys(t.stage for t in trials if t.stage != "joint")),
    )


# ---------------------------------------------------------------- the report's and the dashboard's study

#: objectives of the report tests: throughput at its best level, TTFT p99 at concurrency 8
REPORT_OBJECTIVES = (
    Objective("output_throughput", "maximize", "best", 0),
    Objective("ttft_p99_ms", "minimize", 8, 1),
)
REPORT_DISTRIBUTIONS = {
    "max_num_seqs": distribution_to_json(IntDistribution(1, 256, log=True)),
    "enable_prefix_caching": distribution_to_json(CategoricalDistribution([True, False])),
}
NGRAM_K3 = {"method": "ngram", "num_speculative_tokens": 3}


def report_trial(
    number: int,
    levels: Sequence[LevelResult],
    *,
    role: str = "search",
    params: dict[str, Any] | None = None,
    config: EngineConfig | dict[str, Any] | None = None,
    **kw: Any,
) -> TrialResult:
    """A trial whose searched params are max_num_seqs and enable_prefix_caching (for importances)."""
    if params is None:
        params = (
            {}
            if role == "stock"
            else {"max_num_seqs": 4 * (number + 1), "enable_prefix_caching": number % 2 == 0}
        )
    return trial(
        number,
        levels,
        role=role,
        params=params,
        config=EngineConfig(**params) if config is None else config,
        objectives=REPORT_OBJECTIVES,
        distributions={k: REPORT_DISTRIBUTIONS[k] for k in params},
        argv=("vllm", "serve", "m", "--host", "127.0.0.1", "--port", "1"),
        start_s=60 * number,
        took_s=30,
        **kw,
    )


def report_study(*trials: TrialResult, pareto: Sequence[str] = ()) -> StudyResults:
    return study(*trials, objectives=REPORT_OBJECTIVES, front=pareto, name="rep", spec={})


def full_report_study() -> StudyResults:
    """Stock (0), two tuned trials (1 is the tuned baseline), an n-gram trial (3, the fastest), an
    infeasible trial (4) and a failed one (5); the front is 2 and 3."""
    return report_study(
        report_trial(0, [level(1, 100, 20), level(8, 400, 80)], role="stock"),
        report_trial(1, [level(1, 110, 18), level(8, 600, 60)]),
        report_trial(2, [level(1, 90, 10), level(8, 500, 40)]),
        report_trial(
            3,
            [
                level(
                    1,
                    150,
                    15,
                    spec_acceptance_rate=0.6,
                    spec_mean_acceptance_length=2.8,
                    kv_cache_usage_peak=0.25,
                ),
                level(
                    8,
                    700,
                    90,
                    spec_acceptance_rate=0.5,
                    spec_mean_acceptance_length=2.5,
                    kv_cache_usage_peak=0.93,
                ),
            ],
            config={"max_num_seqs": 16, "speculative": NGRAM_K3},
        ),
        report_trial(4, [level(1, 999, 1), level(8, 9999, 1)], constraints={"c": 1.0}),  # infeasible
        report_trial(5, [level(1, 50, 10)], state="FAIL", reason="oom", message="CUDA out of memory"),
        pareto=("2", "3"),
    )
