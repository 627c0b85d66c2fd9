"""What the tests of the committed trained-pair studies share: the figures a study's write-up quotes,
formatted as quoted, from its summary.
(The pair served on the real engine is nova_search/testing/pair.py.)"""

from __future__ import annotations


def quoted_figures(summary: dict) -> dict[str, object]:
    """The figures a committed H200 study's write-up quotes, as it quotes them: every gain with its
    interval, every drafter's acceptance per level, and the GPU time with its windows. A test pins them
    to the summary recomputed from the kept data, so a quoted figure is one the data reproduces."""
    gpu = summary["gpu_time_s"]
    return {
        "gains": [
            f"{g['diff_pct']:+.1f} % [{g['ci_low']:+.1f}, {g['ci_high']:+.1f}]"
            for d in summary["drafters"].values()
            for g in d["per_level"]
        ],
        "acceptance": {
            trial["method"]: " / ".join(
                f"{a['acceptance_rate']:.2f} ({a['mean_acceptance_length']:.2f})"
                for a in trial["per_level"].values()
            )
            for trial in summary["acceptance"].values()
        },
        "gpu_time": f"{sum(gpu.values()):.0f} s, of which windows {gpu['windows']:.0f} s",
    }
