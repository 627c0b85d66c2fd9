"""Benchmark summary (prints figures): where a study's GPU time went and what the best trial gained.

Reads a study exported by `nova-search dump` (JSON) and prints, as markdown:
  - stock vs the best trial by the first objective, per concurrency level (output tok/s and %);
  - the best trial's launch command;
  - per trial: boot, measurement and total seconds, and the share of GPU time inside measurement windows;
  - the first boot (cold compile cache) against the later ones.

    .venv/bin/python benchmarks/h200/summarize.py benchmarks/results/h200-qwen3-8b/study.json
"""

from __future__ import annotations

import json
import shlex
import statistics
import sys


def main(path: str) -> None:
    study = json.load(open(path))
    trials = study["trials"]
    first = study["objectives"][0]
    stock = next(t for t in trials if t["role"] == "stock" and t["state"] == "COMPLETE")
    done = [t for t in trials if t["state"] == "COMPLETE" and t["role"] != "stock"]
    best = max(done, key=lambda t: t["values"][first])
    plain = [t for t in done if not (t["config"] or {}).get("speculative")]
    tuned = max(plain, key=lambda t: t["values"][first]) if plain else None
    print(
        f"study {study['study']}: {len(trials)} trials, device {stock['device_name']}, "
        f"vLLM {stock['engine_version']}"
    )
    print(f"\nstock (trial {stock['number']}) vs best by {first} (trial {best['number']}):\n")
    print("| concurrency | stock tok/s | best tok/s | gain | stock TTFT p99 ms | best TTFT p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for a, b in zip(stock["levels"], best["levels"], strict=True):
        gain = (b["output_throughput"] / a["output_throughput"] - 1) * 100
        print(
            f"| {a['concurrency']} | {a['output_throughput']:.0f} | {b['output_throughput']:.0f} | "
            f"{gain:+.1f} % | {a['ttft_p99_ms']:.0f} | {b['ttft_p99_ms']:.0f} |"
        )
    if tuned is not None:
        print(f"\nstock vs the best non-speculative trial (trial {tuned['number']}):\n")
        print("| concurrency | stock tok/s | tuned tok/s | gain | stock TTFT p99 ms | tuned TTFT p99 ms |")
        print("|---:|---:|---:|---:|---:|---:|")
        for a, b in zip(stock["levels"], tuned["levels"], strict=True):
            gain = (b["output_throughput"] / a["output_throughput"] - 1) * 100
            print(
                f"| {a['concurrency']} | {a['output_throughput']:.0f} | {b['output_throughput']:.0f} | "
                f"{gain:+.1f} % | {a['ttft_p99_ms']:.0f} | {b['ttft_p99_ms']:.0f} |"
            )
    rates = [lv.get("spec_acceptance_rate") for lv in best["levels"]]
    if any(r is not None for r in rates):
        print(
            "\nbest trial's draft acceptance rate per level: "
            + ", ".join(
                f"{lv['concurrency']}: {r:.3f}"
                for lv, r in zip(best["levels"], rates, strict=True)
                if r is not None
            )
        )
    print("\nbest launch command:\n")
    print("    " + shlex.join(best["deployable_argv"]))

    print("\nper trial (seconds of GPU time; pruned trials were never launched):\n")
    print("| trial | state | boot s | measured s | total s | measured share |")
    print("|---:|---|---:|---:|---:|---:|")
    boots, measured, total = [], 0.0, 0.0
    for t in trials:
        tm = t["timing"] or {}
        if not tm.get("total_s") or t["state"] == "PRUNED":
            print(f"| {t['number']} | {t['state']} | – | – | {tm.get('total_s', 0):.0f} | – |")
            continue
        boots.append(tm.get("boot_s", 0.0))
        measured += tm.get("measure_s", 0.0)
        total += tm["total_s"]
        share = tm.get("measure_s", 0.0) / tm["total_s"] * 100
        print(
            f"| {t['number']} | {t['state']} | {tm.get('boot_s', 0):.0f} | {tm.get('measure_s', 0):.0f} | "
            f"{tm['total_s']:.0f} | {share:.0f} % |"
        )
    print(
        f"\nall launched trials: {total:.0f} s of GPU time ({total / 3600:.3f} GPU-hours), "
        f"{measured:.0f} s inside measurement windows: {measured / total * 100:.0f} %; "
        f"boot {sum(boots):.0f} s: {sum(boots) / total * 100:.0f} %; the rest (warmup requests, "
        f"window drain, /metrics, teardown): {(total - measured - sum(boots)) / total * 100:.0f} %"
    )
    print(f"mean cost of a launched trial: {total / len(boots):.0f} GPU-seconds")
    print(
        f"first boot (cold compile cache): {boots[0]:.0f} s; later boots: median "
        f"{statistics.median(boots[1:]):.0f} s (min {min(boots[1:]):.0f}, max {max(boots[1:]):.0f})"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/h200-qwen3-8b/study.json")
