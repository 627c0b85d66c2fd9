"""Benchmark (prints figures): does the sampler learn from configurations that cannot boot?

A synthetic study, no engine: nova's TPE settings (``study.make_sampler``) search three knobs of a
vLLM-like space, two objectives (throughput up, TTFT down), where a region of the space "runs out of
memory" at boot: high ``gpu_memory_utilization`` (above 0.92), or more sequences than the KV memory
left by the utilization holds. The best throughput sits at that region's edge, as it does on a real
GPU. Each failed boot is told to Optuna in one of two ways (random search beside them, for scale):

- ``FAIL``: what nova did before; TPE reads COMPLETE and PRUNED trials only, so it never sees it;
- ``PRUNED + infeasible``: what nova does now (trial.UNLAUNCHABLE_REASONS): PRUNED with the
  constraint ``launchable`` = 1, which TPE puts among the bad trials.

Over many seeds it prints how many of the trials were failed boots, how many proposals repeated an
earlier configuration (each a boot nova would pay again; ``--discrete`` draws two knobs from lists),
the median number of trials until one within 5 % of the best feasible throughput (a seed that never
got there counts as more than the trials run), and the best found. The figures are the sampler's on
this made-up landscape, not a GPU's: they show the mechanism, not a measured saving.

    .venv/bin/python -m benchmarks.failed_boot_feedback [--seeds 20] [--trials 40] [--discrete]
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import optuna

from nova_search.search.sampler import make_sampler
from nova_search.spec import parse_spec

GIB_PER_SEQ = 0.25  # KV memory a sequence needs at the workload's length (made up, H200-like scale)
GPU_GIB, WEIGHTS_GIB, OVERHEAD_GIB = 141.0, 17.0, 40.0


def kv_gib(util: float) -> float:
    return util * GPU_GIB - WEIGHTS_GIB - OVERHEAD_GIB


def boots(util: float, seqs: int) -> bool:
    return util <= 0.92 and seqs * GIB_PER_SEQ <= kv_gib(util)


def figures(util: float, seqs: int, prefix: bool) -> tuple[float, float]:
    """(output tok/s, TTFT ms) of a configuration that boots."""
    return seqs * 40.0 * (1.1 if prefix else 1.0) / (1 + seqs / 400), 50.0 + 2.0 * seqs


UTILS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]
SEQS = [8, 16, 32, 64, 128, 256, 512]


def best_throughput(discrete: bool) -> float:
    """The best throughput a configuration that boots reaches (on the lists with ``discrete``)."""
    utils = UTILS if discrete else [u / 1000 for u in range(500, 981)]
    seqs = SEQS if discrete else range(8, 513)
    return max(figures(u, s, True)[0] for u in utils for s in seqs if boots(u, s))


def run(
    seed: int, n_trials: int, mode: str, target: float, discrete: bool = False
) -> tuple[int, int | None, float, int]:
    """(failed boots, trials until one within 5 % of the best, the best throughput found, proposals that
    repeated an earlier configuration) for one seed and one way of telling."""
    spec = parse_spec(
        {
            "name": "synthetic",
            "model": {"path": "m", "vocab_size": 1000},
            "sweep": {"concurrency": [1], "requests": 1},
            "objectives": [{"metric": "output_throughput", "direction": "maximize"}],
            "sampler": {"name": "random" if mode == "random" else "tpe", "seed": seed},
        }
    )
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=make_sampler(spec))
    failed, reached, found, repeated = 0, None, 0.0, 0
    seen: set[tuple] = set()
    for n in range(1, n_trials + 1):
        t = study.ask()
        if discrete:
            util = t.suggest_categorical("gpu_memory_utilization", UTILS)
            seqs = t.suggest_categorical("max_num_seqs", SEQS)
        else:
            util = t.suggest_float("gpu_memory_utilization", 0.5, 0.98)
            seqs = t.suggest_int("max_num_seqs", 8, 512, log=True)
        prefix = t.suggest_categorical("enable_prefix_caching", [True, False])
        repeated += (util, seqs, prefix) in seen
        seen.add((util, seqs, prefix))
        if not boots(util, seqs):
            failed += 1
            if mode == "fail":
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            else:
                t.set_constraint("launchable", 1.0)
                study.tell(t, state=optuna.trial.TrialState.PRUNED)
            continue
        tput, ttft = figures(util, seqs, prefix)
        study.tell(t, [tput, ttft])
        found = max(found, tput)
        if reached is None and tput >= 0.95 * target:
            reached = n
    return failed, reached, found, repeated


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--trials", type=int, default=40)
    p.add_argument(
        "--discrete",
        action="store_true",
        help="utilization and max_num_seqs from 7 values each (98 configurations), as specs often list them",
    )
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")
    target = best_throughput(args.discrete)
    print(f"best feasible throughput {target:.0f}; {args.seeds} seeds x {args.trials} trials\n")
    print(
        "| failed boot told as | failed boots (median of seeds) | trials to within 5 % of the best "
        "(median) | seeds that never got there | best found, of the best (median) | repeated proposals "
        "(median) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    ways = (
        ("fail", "FAIL (TPE)"),
        ("pruned", "PRUNED + infeasible (TPE)"),
        ("random", "random search, for scale"),
    )
    for mode, label in ways:
        results = [run(seed, args.trials, mode, target, args.discrete) for seed in range(args.seeds)]
        # a seed that never got there counts as more than the trials run
        med = statistics.median(r if r is not None else float("inf") for _, r, _, _ in results)
        shown = f"> {args.trials}" if med == float("inf") else f"{med:g}"
        print(
            f"| {label} | {statistics.median(f for f, _, _, _ in results):g} of {args.trials} | {shown} | "
            f"{sum(1 for _, r, _, _ in results if r is None)} of {args.seeds} | "
            f"{statistics.median(b for _, _, b, _ in results) / target:.1%} | "
            f"{statistics.median(d for _, _, _, d in results):g} |"
        )


if __name__ == "__main__":
    main()
