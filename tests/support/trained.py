"""What the tests of the committed trained-pair studies share: a study's README quotes its summary.
(The pair served on the real engine is benchmarks/harness/pair.py.)"""

from __future__ import annotations


def assert_readme_quotes_summary(readme: str, summary: dict) -> None:
    """A committed H200 study's README quotes its summary: every gain with its interval, every
    drafter's acceptance per level, and the GPU time with its windows."""
    for d in summary["drafters"].values():
        for g in d["per_level"]:
            assert f"{g['diff_pct']:+.1f} % [{g['ci_low']:+.1f}, {g['ci_high']:+.1f}]" in readme
    for trial in summary["acceptance"].values():
        quoted = " / ".join(
            f"{a['acceptance_rate']:.2f} ({a['mean_acceptance_length']:.2f})"
            for a in trial["per_level"].values()
        )
        assert quoted in readme, trial["method"]
    gpu = summary["gpu_time_s"]
    assert f"{sum(gpu.values()):.0f} s, of which windows {gpu['windows']:.0f} s" in readme
