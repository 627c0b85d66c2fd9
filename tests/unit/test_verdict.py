"""The speculative verdict and the deployment policy, from recorded profiles (no engine)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from nova_search.analysis.gains import Profile
from nova_search.analysis.verdict import build_verdict
from nova_search.knobs import EngineConfig
from nova_search.report.policy import drafter_rows, policy_rows

LEVELS = (1, 4, 16, 64)
BASE = {"kv_cache_dtype": "fp8", "max_num_seqs": 64, "speculative": None}


def profile(
    key: str,
    tok_s: dict[int, float],
    *,
    method: str = "none",
    k: int | None = None,
    role: str = "search",
    config: dict | None = None,
    windows: int = 5,
    noise: float = 0.01,
    seed: int = 0,
    latency: dict[str, dict[int, float]] | None = None,
    equivalent: bool | None = None,
) -> Profile:
    cfg = dict(config or BASE)
    if method != "none":
        cfg["speculative"] = {"method": method, "num_speculative_tokens": k}
    engine_config = EngineConfig.from_dict(cfg)
    rng = np.random.default_rng(seed)
    levels, wins = {}, {}
    for lv, v in tok_s.items():
        samples = [float(v * np.exp(rng.normal(0, noise))) for _ in range(windows)]
        row = {"output_throughput": float(np.median(samples))}
        for m, per in (latency or {}).items():
            row[m] = per.get(lv)
        levels[lv] = row
        wins[lv] = [{"output_throughput": s} for s in samples]
    stage, _, number = key.partition("#")
    return Profile(
        key=key,
        study=f"s.{stage}",
        number=int(number),
        role=role,
        config=engine_config,
        argv=("vllm", "serve", "m", key),
        levels=levels,
        windows=wins,
        equivalent=equivalent,
    )


def verdict(profiles, **kw):
    return build_verdict(profiles, metric="output_throughput", higher_is_better=True, levels=LEVELS, **kw)


STOCK = profile("tune#0", {1: 80, 4: 250, 16: 600, 64: 900}, role="stock", config={"speculative": None})
TUNED = profile("spec#0", {1: 100, 4: 300, 16: 800, 64: 1200}, role="tuned", seed=1)


def test_speculation_that_wins_at_low_concurrency_and_loses_at_high_is_deployed_only_low():
    eagle = profile("spec#1", {1: 150, 4: 390, 16: 800, 64: 1000}, method="eagle3", k=3, seed=2)
    v = verdict([STOCK, TUNED, eagle], tuned="spec#0")
    (d,) = v.drafters
    assert d.method == "eagle3" and d.status == "accepted"
    assert d.verified_range == (1, 4)
    assert [g.verdict for g in d.per_level] == [
        "verified_gain",
        "verified_gain",
        "not_verified",
        "verified_loss",
    ]
    assert [(r.min_concurrency, r.max_concurrency, r.choice) for r in v.policy] == [
        (1, 4, "speculative"),
        (5, None, "tuned"),
    ]
    spec_range = v.policy[0]
    assert spec_range.trial == "spec#1" and spec_range.argv[-1] == "spec#1"
    assert spec_range.gain_pct is not None and spec_range.gain_pct > 25
    assert spec_range.ci_low is not None and spec_range.ci_low > 0
    # the range quotes its largest gain with that level's own interval, not an envelope over levels
    best = max(d.per_level[:2], key=lambda g: g.diff_pct)
    assert spec_range.gain_level == best.concurrency
    assert (spec_range.gain_pct, spec_range.ci_low, spec_range.ci_high) == (
        best.diff_pct,
        best.ci_low,
        best.ci_high,
    )
    assert policy_rows(v)[0][3].endswith(f"at {best.concurrency}")
    assert v.policy[1].levels == (16, 64)
    # the gain is quoted against tuned; tuned vs stock is reported apart
    assert dict(v.tuned_vs_stock)[64] is not None and dict(v.tuned_vs_stock)[64] > 25


def test_a_drafter_that_never_clears_the_bar_is_rejected_with_its_data():
    ngram = profile("spec#2", {1: 95, 4: 290, 16: 700, 64: 1000}, method="ngram", k=4, seed=3)
    v = verdict([STOCK, TUNED, ngram], tuned="spec#0")
    (d,) = v.drafters
    assert d.status == "rejected"
    assert "rejected: verified loss against tuned" in d.reason
    assert len(d.per_level) == 4 and all(g.diff_pct is not None for g in d.per_level)
    assert [r.choice for r in v.policy] == ["tuned"]
    assert v.policy[0].min_concurrency == 1 and v.policy[0].max_concurrency is None
    assert any("does not pay" in n for n in v.notes)
    assert v.schedule is None


def test_speculation_verified_only_in_the_middle_falls_back_to_tuned_on_both_sides():
    mid = profile("spec#3", {1: 101, 4: 380, 16: 1000, 64: 1190}, method="dflash", k=15, seed=4)
    v = verdict([TUNED, mid], tuned="spec#0")
    assert [(r.min_concurrency, r.max_concurrency, r.choice) for r in v.policy] == [
        (1, 3, "tuned"),
        (4, 16, "speculative"),
        (17, None, "tuned"),
    ]


def test_a_drafter_that_wins_at_both_ends_and_loses_between_has_two_verified_ranges():
    # the H200 trained study's n-gram: verified better at 1 and 256, a verified loss at 16 and 64.
    # Its range is never the span 1-256 across the losses
    ngram = profile("spec#1", {1: 150, 4: 300, 16: 600, 64: 1500}, method="ngram", k=4, seed=2)
    v = verdict([STOCK, TUNED, ngram], tuned="spec#0")
    (d,) = v.drafters
    assert [g.verdict for g in d.per_level] == [
        "verified_gain",
        "not_verified",
        "verified_loss",
        "verified_gain",
    ]
    assert d.status == "accepted" and d.verified_ranges == ((1, 1), (64, 64))
    assert d.verified_range == (1, 1)  # the run holding the largest gain (+50 % against +25 %)
    assert "verified ranges 1–1, 64–64" in d.reason
    assert drafter_rows(v)[0][2] == "1–1, 64–64"
    assert [(r.min_concurrency, r.max_concurrency, r.choice) for r in v.policy] == [
        (1, 1, "speculative"),
        (2, 63, "tuned"),
        (64, 64, "speculative"),
        (65, None, "tuned"),
    ]


def test_stock_and_tuned_of_one_configuration_are_an_a_a_test_and_their_drift_is_named():
    # the H200 trained study: stock won the tune stage, and its re-measurement as the tuned baseline
    # read +33 % at 64 with intervals that excluded zero
    stock = profile("tune#0", {1: 100, 4: 300, 16: 800, 64: 900}, role="stock", seed=3)
    tuned = profile("spec#0", {1: 100, 4: 300, 16: 800, 64: 1200}, role="tuned", seed=4)
    v = verdict([stock, tuned], tuned="spec#0")
    (drift,) = [n for n in v.notes if "measured twice" in n]
    assert "64 (+33." in drift and "16 (" not in drift and "confirm" in drift
    same = profile("spec#0", {1: 100, 4: 300, 16: 800, 64: 900}, role="tuned", seed=4)
    assert not [n for n in verdict([stock, same], tuned="spec#0").notes if "measured twice" in n]


def test_configurations_that_differ_only_in_k_give_a_dynamic_schedule():
    k3 = profile("spec#4", {1: 160, 4: 360, 16: 790, 64: 1100}, method="eagle3", k=3, seed=5)
    k2 = profile("spec#5", {1: 140, 4: 400, 16: 900, 64: 1150}, method="eagle3", k=2, seed=6)
    v = verdict([TUNED, k3, k2], tuned="spec#0")
    assert [(r.min_concurrency, r.max_concurrency, r.choice, r.num_speculative_tokens) for r in v.policy] == [
        (1, 3, "speculative", 3),  # k=3 verified best at 1, k=2 at 4: the lower serves up to the next
        (4, 16, "speculative", 2),
        (17, None, "tuned", None),
    ]
    assert v.schedule is not None
    assert v.schedule[:2] == ((1, 3, 3), (4, 16, 2))
    assert v.schedule[2][0] == 17 and v.schedule[2][2] == 0  # drafting off where tuned serves


def test_no_schedule_when_tuned_differs_in_more_than_drafting():
    other = dict(BASE, max_num_seqs=256)
    k3 = profile("spec#4", {1: 160, 4: 360, 16: 790, 64: 1100}, method="eagle3", k=3, seed=5, config=other)
    k2 = profile("spec#5", {1: 140, 4: 400, 16: 900, 64: 1150}, method="eagle3", k=2, seed=6, config=other)
    v = verdict([TUNED, k3, k2], tuned="spec#0")
    assert v.schedule is None and "deploy per range" in v.schedule_note


def test_a_candidate_whose_output_diverged_is_flagged_and_kept_out_of_the_policy():
    fast_but_wrong = profile(
        "spec#6", {1: 300, 4: 900, 16: 2000, 64: 3000}, method="draft_model", k=4, seed=7, equivalent=False
    )
    v = verdict([TUNED, fast_but_wrong], tuned="spec#0")
    (d,) = v.drafters
    assert d.status == "flagged" and "diverged" in d.reason
    assert [r.choice for r in v.policy] == ["tuned"]


def test_tradeoffs_state_which_latencies_improve_and_which_regress():
    lat_t = {"ttft_p99_ms": {1: 100.0, 4: 200.0}, "tpot_mean_ms": {1: 10.0, 4: 12.0}}
    lat_s = {"ttft_p99_ms": {1: 132.7, 4: 250.0}, "tpot_mean_ms": {1: 6.0, 4: 8.0}}
    tuned = profile("spec#0", {1: 100, 4: 300}, role="tuned", seed=1, latency=lat_t)
    spec = profile("spec#7", {1: 150, 4: 330}, method="eagle3", k=3, seed=8, latency=lat_s)
    v = build_verdict(
        [tuned, spec], metric="output_throughput", higher_is_better=True, levels=(1, 4), tuned="spec#0"
    )
    (d,) = v.drafters
    by_metric = {t.metric: t for t in d.tradeoffs}
    assert by_metric["ttft_p99_ms"].effect == "regresses"
    assert round(by_metric["ttft_p99_ms"].change_pct, 1) == 32.7
    assert by_metric["tpot_mean_ms"].effect == "improves"
    assert by_metric["ttft_p99_ms"].concurrency == 1  # the level of its largest verified gain


def test_one_window_per_level_never_verifies_and_says_why():
    tuned = profile("spec#0", {1: 100, 4: 300}, role="tuned", windows=1)
    spec = profile("spec#8", {1: 200, 4: 600}, method="ngram", k=3, windows=1)
    v = build_verdict(
        [tuned, spec], metric="output_throughput", higher_is_better=True, levels=(1, 4), tuned="spec#0"
    )
    (d,) = v.drafters
    assert d.status == "not_enough_evidence" and "not enough evidence (n=1 at 1, 4)" in d.reason
    assert "sweep.repeats >= 3" in d.reason and "measured so far 1: +100.0 %, 4: +100.0 %" in d.reason
    assert [r.choice for r in v.policy] == ["tuned"]
    assert any("not enough evidence to judge ngram" in n for n in v.notes)
    assert not any("does not pay" in n for n in v.notes)


def test_enough_windows_and_no_gain_is_a_rejection_without_a_loss():
    same = profile("spec#2", {1: 100, 4: 300, 16: 800, 64: 1200}, method="ngram", k=4, seed=9, noise=0.05)
    v = verdict([TUNED, same], tuned="spec#0")
    (d,) = v.drafters
    assert [g.verdict for g in d.per_level] == ["not_verified"] * 4
    assert d.status == "rejected" and "rejected: never verified better than tuned" in d.reason
    assert any("does not pay" in n for n in v.notes)


def test_a_latency_objective_ranks_by_lower_is_better():
    lat_t = {"ttft_p99_ms": {1: 100.0, 4: 200.0}}
    tuned = profile("spec#0", {1: 100, 4: 300}, role="tuned", latency=lat_t, windows=1)
    tuned = Profile(
        **{
            **tuned.__dict__,
            "windows": {
                1: [{"ttft_p99_ms": x} for x in (99, 100, 101, 100, 102)],
                4: [{"ttft_p99_ms": x} for x in (198, 200, 203, 199, 201)],
            },
        }
    )
    spec = Profile(
        **{
            **profile("spec#9", {1: 100, 4: 300}, method="eagle3", k=3).__dict__,
            "windows": {
                1: [{"ttft_p99_ms": x} for x in (80, 81, 79, 80, 82)],
                4: [{"ttft_p99_ms": x} for x in (260, 255, 262, 258, 261)],
            },
        }
    )
    v = build_verdict(
        [tuned, spec], metric="ttft_p99_ms", higher_is_better=False, levels=(1, 4), tuned="spec#0"
    )
    (d,) = v.drafters
    assert [g.verdict for g in d.per_level] == ["verified_gain", "verified_loss"]
    assert [(r.min_concurrency, r.max_concurrency, r.choice) for r in v.policy] == [
        (1, 1, "speculative"),
        (2, None, "tuned"),
    ]


def test_without_a_tuned_baseline_there_is_no_verdict():
    eagle = profile("spec#1", {1: 150, 4: 390, 16: 800, 64: 1000}, method="eagle3", k=3, seed=2)
    v = verdict([STOCK, eagle], tuned=None)
    assert v.tuned is None and v.drafters == () and v.policy == ()
    assert v.stock == "tune#0" and "nothing to compare against" in v.notes[0]


LEAD = {1: 100.0, 4: 300.0, 16: 800.0, 64: 1200.0}


def pairs_against(lead: dict[int, float], ratio: float) -> dict:
    """3 ABBA pairs a level: the tuned side at ``lead``, the candidate at ``ratio`` times it, 1 % apart."""
    return {
        lv: (
            tuple({"output_throughput": v * m} for m in (1.0, 1.01, 0.99)),
            tuple({"output_throughput": v * ratio * m} for m in (1.0, 1.01, 0.99)),
        )
        for lv, v in lead.items()
    }


def test_the_verdict_uses_the_pairs_with_the_tuned_baseline_when_a_candidate_has_them():
    # every window of the candidate is a 30 % gain but noisy; its pairs with tuned say 5 %, tightly
    cand = profile("spec#2", {1: 130, 4: 390, 16: 1040, 64: 1560}, method="ngram", k=3, windows=1, seed=2)
    paired = pairs_against(LEAD, 1.05)
    with_pairs = replace(cand, paired_with=TUNED.key, paired=paired)
    v = verdict([TUNED, with_pairs], tuned=TUNED.key)
    gains = v.drafters[0].per_level
    assert all(g.n_tuned == 3 and g.n_candidate == 3 for g in gains)
    assert all(abs(g.diff_pct - 5.0) < 0.01 and g.verdict == "verified_gain" for g in gains)
    # pairs with another trial are not pairs with tuned: every window is compared instead
    elsewhere = replace(cand, paired_with="spec#1", paired=paired)
    v = verdict([TUNED, elsewhere], tuned=TUNED.key)
    assert all(g.n_tuned == 5 and g.n_candidate == 1 for g in v.drafters[0].per_level)
    assert not any(g.paired for g in v.drafters[0].per_level)
    assert not any("unpaired" in n for n in v.notes)  # no drafter paired: nothing to set apart


def test_a_drafter_judged_without_pairs_beside_paired_ones_is_named():
    paired = pairs_against(LEAD, 1.3)
    eagle = profile("spec#1", {1: 130, 4: 390, 16: 1040, 64: 1560}, method="eagle3", k=3, seed=2)
    eagle = replace(eagle, paired_with=TUNED.key, paired=paired)
    ngram = profile("spec#2", {1: 130, 4: 390, 16: 1040, 64: 1560}, method="ngram", k=3, seed=3)
    v = verdict([TUNED, eagle, ngram], tuned=TUNED.key)
    judged = {d.method: d for d in v.drafters}
    assert all(g.paired for g in judged["eagle3"].per_level)
    assert not any(g.paired for g in judged["ngram"].per_level)
    (note,) = [n for n in v.notes if "unpaired" in n]
    assert note.startswith("spec#2 judged on unpaired windows") and "spec#1" not in note
