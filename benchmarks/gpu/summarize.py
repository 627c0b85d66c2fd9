"""Benchmark summary (prints figures) of a GPU study: what the best trial gained over stock and where the
study's GPU time went.

Reads a study from its storage through nova's read side (``results.load.load_results``) and prints, as
markdown:
  - stock vs the best trial by the first objective (``results.select.top_trial``), per concurrency level
    (output tok/s and %), then stock vs the tuned baseline (``results.select.tuned_baseline``);
  - the best trial's launch command;
  - per trial: boot, measurement and total seconds, and the share of its GPU time inside measurement
    windows (``results.cost.trial_gpu_time``), then the study's split (``results.cost.gpu_time``);
  - the first boot (cold compile cache) against the later ones.

    .venv/bin/python -m benchmarks.gpu.summarize                       # the recorded H200 study
    .venv/bin/python -m benchmarks.gpu.summarize --storage sqlite:///nova.db --study NAME
"""

from __future__ import annotations

import argparse
import shlex
import statistics

from nova_search.results.cost import gpu_time, trial_gpu_time
from nova_search.results.load import load_results
from nova_search.results.select import stock_trial, top_trial, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.testing import REPO

#: the recorded H200 study (studies/experiments/h200-qwen3-8b.yaml)
RECORDED = f"sqlite:///{REPO / 'benchmarks' / 'results' / 'h200-qwen3-8b' / 'study.db'}"


def against_stock(stock: TrialResult, other: TrialResult, name: str) -> list[str]:
    """A markdown table: ``other``'s output throughput and TTFT p99 against stock's, level by level."""
    out = [
        f"| concurrency | stock tok/s | {name} tok/s | gain | stock TTFT p99 ms | {name} TTFT p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for a, b in zip(stock.levels, other.levels, strict=True):
        gain = (b.output_throughput / a.output_throughput - 1) * 100
        out.append(
            f"| {a.concurrency} | {a.output_throughput:.0f} | {b.output_throughput:.0f} | "
            f"{gain:+.1f} % | {a.ttft_p99_ms or 0:.0f} | {b.ttft_p99_ms or 0:.0f} |"
        )
    return out


def markdown(results: StudyResults) -> str:
    stock, best, tuned = stock_trial(results), top_trial(results), tuned_baseline(results)
    if stock is None or best is None:
        return f"study {results.study_name}: no completed stock baseline or no feasible trial yet"
    first = results.objectives[0].name
    out = [
        f"study {results.study_name}: {len(results.trials)} trials, device {stock.device_name}, "
        f"vLLM {stock.engine_version}",
        "",
        f"stock (trial {stock.number}) vs best by {first} (trial {best.number}):",
        "",
        *against_stock(stock, best, "best"),
    ]
    if tuned is not None:
        out += [
            "",
            f"stock vs the tuned baseline (trial {tuned.number}):",
            "",
            *against_stock(stock, tuned, "tuned"),
        ]
    rates = [(lv.concurrency, lv.spec_acceptance_rate) for lv in best.levels]
    if any(r is not None for _, r in rates):
        out += [
            "",
            "best trial's draft acceptance rate per level: "
            + ", ".join(f"{c}: {r:.3f}" for c, r in rates if r is not None),
        ]
    out += ["", "best launch command:", "", "    " + shlex.join(best.deployable_argv)]

    out += [
        "",
        "per trial (seconds of GPU time; pruned trials were never launched):",
        "",
        "| trial | state | boot s | measured s | total s | measured share |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    boots = []
    for t in results.trials:
        tm = t.timing
        spent = sum(trial_gpu_time(t).values())
        if spent <= 0 or t.state == "PRUNED":
            out.append(f"| {t.number} | {t.state} | – | – | {tm.get('total_s', 0):.0f} | – |")
            continue
        if "boot_s" in tm:
            boots.append(tm["boot_s"])
        share = trial_gpu_time(t)["windows"] / spent * 100
        out.append(
            f"| {t.number} | {t.state} | {tm.get('boot_s', 0):.0f} | {tm.get('measure_s', 0):.0f} | "
            f"{tm['total_s']:.0f} | {share:.0f} % |"
        )
    cost = gpu_time(results)
    launched = sum(1 for t in results.trials if sum(trial_gpu_time(t).values()) > 0)
    out += ["", cost.text()]
    if launched:
        out.append(f"mean cost of a launched trial: {cost.total / launched:.0f} {cost.unit}-seconds")
    if len(boots) > 1:
        later = boots[1:]
        out.append(
            f"first boot (cold compile cache): {boots[0]:.0f} s; later boots: median "
            f"{statistics.median(later):.0f} s (min {min(later):.0f}, max {max(later):.0f})"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--storage", default=RECORDED, help="the study's storage URL (default: the recorded study)"
    )
    p.add_argument("--study", default="h200-qwen3-8b", help="the study's name")
    args = p.parse_args()
    print(markdown(load_results(args.study, args.storage)))


if __name__ == "__main__":
    main()
