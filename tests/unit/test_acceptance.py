"""Synthetic acceptance (issue 43): the spec's profiles, the argv nova builds for them, the projection
labels every reader shows, export dropping the profile, and the break-even map's analysis."""

from __future__ import annotations

import copy
import json
from typing import Any

import optuna
import pytest

from nova_search.analysis import projection
from nova_search.analysis.breakeven import (
    GainRow,
    acceptance_length,
    break_even,
    gain_row,
    k_schedule,
    next_length,
)
from nova_search.analysis.gains import Profile
from nova_search.analysis.verdict import build_verdict
from nova_search.engine.command import config_args
from nova_search.errors import SpecError
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.report.breakeven_map import breakeven_figure, breakeven_markdown
from nova_search.results.launch import Launch, deployable, without_synthetic
from nova_search.search.configs import sample
from nova_search.spec import StudySpec, parse_spec

BASE = {
    "kv_cache_dtype": "fp8",
    "max_num_seqs": 8,
    "max_num_batched_tokens": 1024,
    "enable_prefix_caching": True,
    "enable_chunked_prefill": False,
}


def spec_with(
    raw: dict[str, Any], acceptance: dict[str, Any], *, k: Any = 3, device: str = "cuda"
) -> StudySpec:
    raw = copy.deepcopy(raw)
    raw["engine"]["device"] = device
    raw["space"]["speculative"] = {
        "method": {"choices": ["eagle3", "ngram"]},
        "num_speculative_tokens": k,
        "drafters": {"eagle3": ".nova/tiny-model/eagle3"},
        "acceptance": acceptance,
    }
    return parse_spec(raw)


def refusal(raw: dict[str, Any], acceptance: dict[str, Any], **kw: Any) -> str:
    with pytest.raises(SpecError) as e:
        spec_with(raw, acceptance, **kw)
    return str(e.value)


# ---------------------------------------------------------------- the spec


def test_a_length_reaches_vllm_as_synthetic_sampling(tiny_raw: dict[str, Any]) -> None:
    spec = spec_with(tiny_raw, {"eagle3": {"length": 2.6}})
    config = sample(optuna.trial.FixedTrial({**BASE, "spec_method": "eagle3"}), spec)
    assert config.speculative is not None
    assert config.speculative.acceptance_length == 2.6
    argv = config_args(config)
    payload = json.loads(argv[argv.index("--speculative-config") + 1])
    assert payload["rejection_sample_method"] == "synthetic"
    assert payload["synthetic_acceptance_length"] == 2.6
    assert "synthetic_acceptance_rates" not in payload
    # another method of the same space keeps its own acceptance
    plain = sample(optuna.trial.FixedTrial({**BASE, "spec_method": "ngram"}), spec)
    assert plain.speculative is not None and plain.speculative.rejection_sample_method is None
    assert projection.label(plain) is None


def test_rates_and_a_searched_range(tiny_raw: dict[str, Any]) -> None:
    spec = spec_with(tiny_raw, {"eagle3": {"rates": [0.9, 0.6, 0.3]}})
    config = sample(optuna.trial.FixedTrial({**BASE, "spec_method": "eagle3"}), spec)
    payload = config.speculative.as_json_dict()  # type: ignore[union-attr]
    assert payload["synthetic_acceptance_rates"] == [0.9, 0.6, 0.3]
    assert projection.label(config) == "projected at acceptance L=2.8 (rates 0.9, 0.6, 0.3)"
    # stored and read back (nova:config) unchanged
    assert EngineConfig.from_dict(json.loads(json.dumps(config.as_dict()))) == config

    spec = spec_with(tiny_raw, {"eagle3": {"lengths": {"low": 1.5, "high": 3.5}}})
    trial = optuna.trial.FixedTrial({**BASE, "spec_method": "eagle3", "acceptance_length": 2.25})
    config = sample(trial, spec)
    assert config.speculative.synthetic_acceptance_length == 2.25  # type: ignore[union-attr]
    assert trial.params["acceptance_length"] == 2.25
    assert "projected_at_acceptance=2.25" in config.label()


@pytest.mark.parametrize(
    ("acceptance", "k", "words"),
    [
        ({"eagle3": {"length": 4.5}}, 3, "acceptance.eagle3.length: 4.5 exceeds k + 1 = 4"),
        ({"eagle3": {"length": 0.5}}, 3, "acceptance.eagle3.length"),
        ({"eagle3": {"length": 2.0, "rates": [0.5, 0.2, 0.1]}}, 3, "exactly one of length"),
        ({"eagle3": {}}, 3, "exactly one of length"),
        ({"eagle3": {"rates": [0.5, 0.7, 0.1]}}, 3, "rates.1: rates must be non-increasing"),
        ({"eagle3": {"rates": [1.5, 0.7, 0.1]}}, 3, "rates.0: must be in [0, 1]"),
        ({"eagle3": {"rates": [0.5, 0.2]}}, 3, "2 rates need num_speculative_tokens fixed at 2"),
        ({"eagle3": {"rates": [0.5, 0.2, 0.1]}}, {"low": 2, "high": 4}, "fixed at 3"),
        ({"eagle3": {"lengths": {"low": 2.0, "high": 3.5}}}, {"low": 2, "high": 4}, "lengths.high: 3.5"),
        ({"eagle3": {"lengths": {"low": 3.0, "high": 2.0}}}, 3, "low (3) must be below high (2)"),
        ({"eagle3": {"lengths": {"choices": [2.0, 4.5]}}}, 3, "lengths.choices: 4.5 exceeds k + 1 = 4"),
        ({"eagle3": {"lengths": {"choices": [2.0, 2.0]}}}, 3, "each length once"),
        (
            {"eagle3": {"lengths": {"choices": []}}},
            3,
            "lengths.listed.choices: List should have at least 1 item",
        ),
        ({"draft_model": {"length": 2.0}}, 3, "acceptance.draft_model: not a drafter method"),
        ({"eagle3": {"length": 2.0, "bogus": 1}}, 3, "bogus"),
    ],
)
def test_bad_profiles_are_refused_naming_the_field(
    tiny_raw: dict[str, Any], acceptance: dict[str, Any], k: Any, words: str
) -> None:
    assert words in refusal(tiny_raw, acceptance, k=k)


def test_the_cpu_device_is_refused_naming_the_field(tiny_raw: dict[str, Any]) -> None:
    text = refusal(tiny_raw, {"eagle3": {"length": 2.0}}, device="cpu")
    assert "space.speculative.acceptance.eagle3: synthetic acceptance needs vLLM's GPU sampler" in text
    assert "engine.device is cpu" in text


# ---------------------------------------------------------------- labels


def _profile(key: str, config: EngineConfig, tok: list[float], role: str = "search") -> Profile:
    return Profile(
        key=key,
        study="s",
        number=0,
        role=role,
        config=config,
        argv=("vllm", "serve", "m"),
        levels={1: {"output_throughput": sorted(tok)[len(tok) // 2]}},
        windows={1: [{"output_throughput": x} for x in tok]},
    )


def test_the_verdict_policy_and_schedule_say_projected() -> None:
    tuned = EngineConfig(max_num_seqs=8)
    synthetic = SpeculativeConfig(
        "eagle3", 3, "d", rejection_sample_method="synthetic", synthetic_acceptance_length=2.6
    )
    cand = tuned.with_values(speculative=synthetic)
    v = build_verdict(
        [
            _profile("tuned", tuned, [100, 101, 99, 100, 102]),
            _profile("spec", cand, [150, 151, 149, 150, 152]),
        ],
        metric="output_throughput",
        higher_is_better=True,
        levels=[1],
        tuned="tuned",
    )
    (d,) = v.drafters
    assert d.status == "accepted"
    assert d.projected == "projected at acceptance L=2.6"
    assert d.reason.startswith("projected at acceptance L=2.6: verified better")
    assert d.per_level[0].projected == "projected at acceptance L=2.6"
    spec_range = next(r for r in v.policy if r.choice == "speculative")
    assert spec_range.projected == "projected at acceptance L=2.6"
    assert any(n.startswith("projected: eagle3 (projected at acceptance L=2.6)") for n in v.notes)


def test_export_drops_the_profile_unless_asked() -> None:
    payload = {"method": "eagle3", "num_speculative_tokens": 3, "model": "/d"}
    synthetic = {**payload, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.6}
    flags = ("--max-num-seqs", "8", "--speculative-config", json.dumps(synthetic))
    launch = Launch(model="/m", flags=flags, gpus=1, engine_version="0.26.0", source="trial 3", device="cuda")
    out = deployable(launch)
    spec = json.loads(out.flags[out.flags.index("--speculative-config") + 1])
    assert spec == payload
    assert any("synthetic acceptance (length 2.6) dropped" in n for n in out.notes)
    kept = deployable(launch, keep_synthetic=True)
    assert json.loads(kept.flags[kept.flags.index("--speculative-config") + 1]) == synthetic
    assert any("synthetic acceptance kept" in n for n in kept.notes)
    assert without_synthetic(["--speculative-config", json.dumps(payload)])[1] is None


# ---------------------------------------------------------------- the break-even map


def _rows(method: str, k: int, c: int, verified_from: float, lengths: list[float]) -> list[GainRow]:
    return [
        GainRow(
            method,
            k,
            c,
            x,
            10.0 * (x - verified_from) + 1,
            (10.0 * (x - verified_from)) if x >= verified_from else -5.0,
            20.0,
            "verified_gain" if x >= verified_from else "not_verified",
            5,
        )
        for x in lengths
    ]


def test_break_even_bisection_and_k_schedule() -> None:
    rows = _rows("eagle3", 3, 1, 1.5, [1.0, 2.0, 3.0, 4.0]) + _rows(
        "eagle3", 3, 64, 3.0, [1.0, 2.0, 3.0, 4.0]
    )
    rows += _rows("eagle3", 5, 1, 0.5, [1.0, 2.0, 3.0]) + _rows("eagle3", 5, 64, 9.0, [1.0, 2.0, 3.0])
    points = {(p.k, p.concurrency): p for p in break_even(rows)}
    assert points[(3, 1)].length == 2.0 and points[(3, 1)].below == 1.0
    assert points[(3, 64)].length == 3.0 and points[(3, 64)].text() == "(2, 3]"
    assert points[(5, 64)].length is None and points[(5, 64)].text() == "never verified up to L=3"

    # bisection: the two ends first, then the middle of the bracket, until it is narrower than 0.1
    cell: list[GainRow] = []
    truth = 2.37
    for _ in range(12):
        x = next_length(cell, 1.0, 4.0, tolerance=0.1)
        if x is None:
            break
        cell += _rows("eagle3", 3, 16, truth, [x])
    (p,) = break_even(cell)
    assert p.below is not None and p.length is not None
    assert p.below < truth <= p.length and p.length - p.below <= 0.1
    assert len(cell) <= 8

    # best k per level at L=3: k=5 at 1 (larger gain there), k=3 at 64, drafting off above none
    schedule, choice = k_schedule(rows, 3.0)
    assert dict((c, k) for c, k, _ in choice) == {1: 5, 64: 3}
    assert schedule == ((1, 63, 5), (64, 1024, 3))
    schedule, _ = k_schedule(rows, 1.0)  # at L=1 only k=5 pays, at 1: drafting off from 64
    assert schedule == ((1, 63, 5), (64, 1024, 0))

    md = breakeven_markdown(break_even(rows), measured=[("eagle3", 3, 2.4)], schedule=schedule)
    assert "Break-even map (projected)" in md and "pays at concurrency 1" in md
    fig = breakeven_figure(break_even(rows), measured=[("eagle3", 3, 2.4)])
    assert any(t.fill == "tonexty" for t in fig.data)


def test_gain_row_and_counters() -> None:
    r = gain_row("dflash", 15, 16, 4.0, [100, 101, 99, 100], [140, 141, 139, 142])
    assert r.verified and r.diff_pct is not None and r.diff_pct > 35
    assert acceptance_length(160, 100) == pytest.approx(2.6)
    assert acceptance_length(5, 0) is None


def test_tpe_draws_the_searched_length_in_range(tiny_raw: dict[str, Any]) -> None:
    spec = spec_with(tiny_raw, {"eagle3": {"lengths": {"low": 1.5, "high": 3.5}}})
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=3))
    seen = set()
    for _ in range(6):
        trial = study.ask()
        config = sample(trial, spec)
        length = config.speculative.acceptance_length if config.speculative else None
        if trial.params["spec_method"] == "eagle3":
            assert length is not None and 1.5 <= length <= 3.5
            assert projection.label(config) == f"projected at acceptance L={length:.3g}"
            seen.add(length)
        else:
            assert length is None and "acceptance_length" not in trial.params
        study.tell(trial, float(length or 1.0))
    assert seen


def test_listed_lengths_are_each_queued_once(tiny_raw: dict[str, Any]) -> None:
    """``lengths: {choices}``: one queued trial per listed length (per drafter where the space lists
    several), each drawn as the categorical acceptance_length; a lone drafter with one length queues
    nothing (the sampler draws it)."""
    from nova_search.search.lifecycle import drafter_queue

    spec = spec_with(tiny_raw, {"eagle3": {"lengths": {"choices": [2.04, 1.6]}}})
    assert drafter_queue(spec) == [
        {"spec_method": "eagle3", "acceptance_length": 2.04},
        {"spec_method": "eagle3", "acceptance_length": 1.6},
        {"spec_method": "ngram"},
    ]
    config = sample(
        optuna.trial.FixedTrial({**BASE, "spec_method": "eagle3", "acceptance_length": 1.6}), spec
    )
    assert config.speculative is not None and config.speculative.synthetic_acceptance_length == 1.6
    raw = copy.deepcopy(tiny_raw)
    raw["engine"]["device"] = "cuda"
    raw["space"]["speculative"] = {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "drafters": {"eagle3": ".nova/tiny-model/eagle3"},
        "acceptance": {"eagle3": {"lengths": {"choices": [2.04, 1.6]}}},
    }
    assert drafter_queue(parse_spec(raw)) == [{"acceptance_length": 2.04}, {"acceptance_length": 1.6}]
    raw["space"]["speculative"]["acceptance"] = {"eagle3": {"length": 2.0}}
    assert drafter_queue(parse_spec(raw)) == []


# ---------------------------------------------------------------- one k per drafter (issue 49)


def per_drafter(raw: dict[str, Any], k: Any, acceptance: dict[str, Any] | None = None) -> StudySpec:
    raw = copy.deepcopy(raw)
    raw["engine"]["device"] = "cuda"
    raw["space"]["speculative"] = {
        "method": {"choices": ["eagle3", "dflash"]},
        "num_speculative_tokens": k,
        "drafters": {"eagle3": ".nova/tiny-model/eagle3", "dflash": ".nova/tiny-model/dflash"},
        "acceptance": acceptance or {},
    }
    return parse_spec(raw)


def test_each_drafter_draws_its_own_k_and_is_checked_against_it(tiny_raw: dict[str, Any]) -> None:
    """EAGLE-3 at k=3 and DFlash at k=15 in one space: each trial gets its drafter's k, and each
    acceptance profile is checked against its own drafter's k, not the smallest k of the space."""
    spec = per_drafter(
        tiny_raw, {"eagle3": 3, "dflash": 15}, {"eagle3": {"length": 2.5}, "dflash": {"length": 8.0}}
    )
    for method, k in (("eagle3", 3), ("dflash", 15)):
        config = sample(optuna.trial.FixedTrial({**BASE, "spec_method": method}), spec)
        assert config.speculative is not None and config.speculative.num_speculative_tokens == k
    # ranges: each drafter's k is its own Optuna parameter, so TPE never mixes two distributions
    spec = per_drafter(tiny_raw, {"eagle3": {"low": 1, "high": 4}, "dflash": {"choices": [8, 15]}})
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2))
    drawn: dict[str, set[int]] = {"eagle3": set(), "dflash": set()}
    for _ in range(8):
        trial = study.ask()
        config = sample(trial, spec)
        method = trial.params["spec_method"]
        assert set(trial.params) & {"num_speculative_tokens_eagle3", "num_speculative_tokens_dflash"} == {
            f"num_speculative_tokens_{method}"
        }
        drawn[method].add(config.speculative.num_speculative_tokens)  # type: ignore[union-attr]
        study.tell(trial, 1.0)
    assert drawn["eagle3"] <= {1, 2, 3, 4} and drawn["dflash"] <= {8, 15}


@pytest.mark.parametrize(
    ("k", "acceptance", "words"),
    [
        ({"eagle3": 3}, {}, "num_speculative_tokens.dflash is required: method lists 'dflash'"),
        ({"eagle3": 3, "dflash": 15, "ngram": 2}, {}, "num_speculative_tokens.ngram: not a drafter method"),
        ({"eagle3": 70, "dflash": 15}, {}, "num_speculative_tokens.eagle3: must be 1..64 (got 70)"),
        (
            {"eagle3": {"low": 0, "high": 3}, "dflash": 15},
            {},
            "num_speculative_tokens.eagle3.low: must be 1..64",
        ),
        (
            {"eagle3": 3, "dflash": 15},
            {"eagle3": {"length": 4.5}},
            "acceptance.eagle3.length: 4.5 exceeds k + 1 = 4",
        ),
        (
            {"eagle3": 3, "dflash": 8},
            {"dflash": {"rates": [0.5] * 15}},
            "15 rates need num_speculative_tokens fixed at 15",
        ),
    ],
)
def test_a_k_a_drafter_cannot_take_is_refused_naming_it(
    tiny_raw: dict[str, Any], k: Any, acceptance: dict[str, Any], words: str
) -> None:
    with pytest.raises(SpecError) as e:
        per_drafter(tiny_raw, k, acceptance)
    assert words in str(e.value)
