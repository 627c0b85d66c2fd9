"""Confirmation (spec.confirm) on the stand-in engine, launched as vLLM is: trials near the front are
measured again in ABBA pairs against the slot's leader, which waits asleep (sleep mode: its
completions answer 503, so a window measured on a sleeping server would show as errors) or awake
beside the trial (keep), and is stopped with the worker."""

from __future__ import annotations

import json

import optuna
import pytest
import yaml
from optuna.artifacts import get_all_artifact_meta

from nova_search import schema
from nova_search.results.load import load_results
from nova_search.results.speculation import verdict_of
from nova_search.testing.fake_engine import engine_records
from nova_search.testing.specs import fake_spec_dict, minimal_spec_dict
from tests.support.cli import nova, nova_ok

COMPLETE = optuna.trial.TrialState.COMPLETE
#: the drafter and the sweep of the speculative-stage tests
NGRAM = {
    "method": {"choices": ["ngram"]},
    "num_speculative_tokens": {"low": 2, "high": 4},
    "prompt_lookup_min": 2,
    "prompt_lookup_max": 3,
}
PAIR_SWEEP = {"concurrency": [2], "requests": 6, "warmup_requests": 1}


def _run(tmp_path, raw: dict, env: dict[str, str]) -> str:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return url


def _confirm_spec(n_trials: int, name: str, **confirm: object) -> dict:
    """The stand-in's spec, levels 1 and 4, with ``confirm``; on "cuda" (sleep mode is refused on the
    CPU build; the stand-in has it)."""
    raw = fake_spec_dict(
        n_trials,
        name=name,
        sweep={"concurrency": [1, 4], "warmup_requests": 1, "requests": 8},
        confirm={"host_reserve_gib": 0, **confirm},
    )
    raw["engine"]["device"] = "cuda"
    return raw


def _awake_at_once(record) -> int:
    """The most servers awake at one time, from the stand-in's start / sleep / wake / stop lines."""
    rows = sorted((json.loads(line) for line in record.read_text().splitlines()), key=lambda r: r["t"])
    awake: set[int] = set()
    most = 0
    for r in rows:
        if r["event"] in ("start", "wake"):
            awake.add(r["pid"])
        else:
            awake.discard(r["pid"])
        most = max(most, len(awake))
    return most


@pytest.mark.parametrize("park", ["sleep", "keep"])
def test_trials_near_the_front_are_measured_again_against_a_resident_leader(tmp_path, park):
    record = tmp_path / "engines.jsonl"
    raw = _confirm_spec(4, f"confirm-{park}", min_pairs=2, max_pairs=3, park=park, near=0.5)
    url = _run(tmp_path, raw, {"FAKE_ENGINE_RECORD": str(record), "FAKE_ENGINE_ITL_S": "0.004"})
    trials = optuna.load_study(study_name=raw["name"], storage=url).get_trials()
    assert [t.state for t in trials] == [COMPLETE] * 4

    first = schema.PAIRED.read(trials[0].user_attrs)
    assert first is not None and first.leader is None and first.stopped == "alone" and first.pairs == 2
    assert all(len(ws) == 3 for ws in schema.REPEATS.read(trials[0].user_attrs).values())  # 1 + 2 alone

    paired = [(t, p) for t in trials[1:] if (p := schema.PAIRED.read(t.user_attrs)) is not None]
    assert paired, "no trial after the first was confirmed against the leader"
    for t, p in paired:
        assert p.leader is not None and p.leader < t.number and p.park == park
        assert 2 <= p.pairs <= 3 and p.stopped in ("separated", "cap")
        assert set(p.levels) == {1, 4}
        for c, (lead, mine) in p.levels.items():
            assert len(lead) == len(mine) == p.pairs
            windows = schema.REPEATS.read(t.user_attrs)[c]
            assert len(windows) == 1 + p.pairs  # the exploration window and the trial's side of each pair
            assert [w["output_throughput"] for w in windows[1:]] == [w["output_throughput"] for w in mine]
        # the level told to Optuna is the median over every window of the trial
        levels = {lv.concurrency: lv for lv in schema.LEVELS.read(t.user_attrs)}
        assert all(lv.completed == 8 * (1 + p.pairs) and lv.errors == 0 for lv in levels.values())
        timing = schema.TIMING.read(t.user_attrs)
        assert timing["confirm_s"] > 0 and timing["measure_s"] > 0
        # every request of the leader's windows is kept beside the trial's, as an artifact
        leader_rows = (
            tmp_path / "art" / raw["name"] / f"trial-{t.number:04d}" / "leader-requests.jsonl"
        ).read_text()
        assert len(leader_rows.splitlines()) == 8 * p.pairs * 2
        assert any(
            a.filename == "leader-requests.jsonl"
            for a in get_all_artifact_meta(t, storage=optuna.storages.get_storage(url))
        )
        assert (timing["switch_s"] > 0) == (park == "sleep")

    lives = engine_records(record)
    assert len(lives) == 4 and all(life.stop is not None for life in lives)  # the leader went with the worker
    # the leader outlived the trial that booted it: it served a later trial's pairs
    leaders = {p.leader for _, p in paired}
    by_start = sorted(lives, key=lambda life: life.start)
    assert any(by_start[n].stop > by_start[n + 1].start for n in leaders)
    argv = schema.ARGV.read(trials[1].user_attrs)
    assert ("--enable-sleep-mode" in argv) == (park == "sleep")
    if park == "sleep":
        assert _awake_at_once(record) == 1  # one server awake at a time on the GPU
        # one switch a pair (a server runs all its levels of the pair, and the next pair starts with
        # it), plus the first wake of the leader
        wakes = [r for r in map(json.loads, record.read_text().splitlines()) if r["event"] == "wake"]
        assert len(wakes) == sum(p.pairs + 1 for _, p in paired)
    else:
        assert "sleep" not in record.read_text()
    dumped = json.loads(nova_ok("dump", raw["name"], "--storage", url, "--format", "json"))
    t1 = next(t for t in dumped["trials"] if t["number"] == paired[0][0].number)
    assert t1["paired"]["pairs"] == paired[0][1].pairs
    assert "--enable-sleep-mode" not in t1["deployable_argv"]


def test_the_verdict_judges_candidates_on_their_pairs_with_the_tuned_baseline(tmp_path):
    raw = minimal_spec_dict(
        name="confirm-staged",
        stages=["tune", "speculative"],
        space={
            "max_num_seqs": {"low": 2, "high": 64, "log": True},
            "speculative": NGRAM,
        },
        sweep=PAIR_SWEEP,
        budget={"n_trials": 2, "per_stage": {"tune": 2, "speculative": 3}},
        confirm={"min_pairs": 3, "max_pairs": 3, "park": "keep"},
    )
    url = _run(tmp_path, raw, {})
    results = load_results("confirm-staged", url)
    spec_trials = [t for t in results.trials if t.stage == "speculative"]
    tuned = next(t for t in spec_trials if t.role == "tuned")
    assert tuned.paired is not None and tuned.paired.leader is None  # confirmed alone: n = 1 + 3
    candidates = [t for t in spec_trials if t.role != "tuned" and t.state == "COMPLETE"]
    assert candidates and all(t.paired is not None and t.paired.leader == tuned.number for t in candidates)
    verdict = verdict_of(results)
    (drafter,) = verdict.drafters
    gains = list(drafter.per_level)
    assert gains and all(g.n_tuned == 3 and g.n_candidate == 3 for g in gains)  # the pairs, not every window
    assert drafter.status in ("accepted", "rejected")  # n >= 3 on both sides: the verdict can judge


def test_a_workers_first_drafter_trial_boots_the_tuned_baseline_as_its_leader(tmp_path):
    """One worker measures the tuned baseline and stops (--max-trials 1); the next worker's first
    drafter trial has no leader on its slot, so it boots the finished baseline, as it ran, and is
    judged on pairs with it like the drafter after it."""
    raw = minimal_spec_dict(
        name="adopt",
        stages=["speculative"],
        baselines=[],  # the pairing with the tuned leader is the point: no stock trial
        tuned={"max_num_seqs": 8},
        space={"speculative": NGRAM},
        sweep=PAIR_SWEEP,
        budget={"n_trials": 3},
        confirm={"min_pairs": 3, "max_pairs": 3, "park": "keep"},
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    nova_ok("create", str(spec), "--storage", url)
    art = str(tmp_path / "art")
    nova_ok("worker", "adopt", "--storage", url, "--artifacts-dir", art, "--max-trials", "1")
    out = nova_ok("worker", "adopt", "--storage", url, "--artifacts-dir", art)
    assert "booted as the leader" in out

    results = load_results("adopt", url)
    tuned = next(t for t in results.trials if t.role == "tuned")
    drafters = [t for t in results.trials if t.role != "tuned"]
    assert len(drafters) == 2 and all(t.state == "COMPLETE" for t in drafters)
    assert all(t.paired is not None and t.paired.leader == tuned.number for t in drafters)
    first = min(drafters, key=lambda t: t.number)
    assert first.timing["leader_boot_s"] > 0  # counted as boot time
    assert (
        tmp_path / "art" / "adopt.speculative" / f"trial-{first.number:04d}" / "leader-server.log"
    ).exists()
    (drafter,) = verdict_of(results).drafters
    assert all(g.paired and g.n_tuned == 3 for g in drafter.per_level)
    assert not any("unpaired" in n for n in verdict_of(results).notes)


@pytest.mark.parametrize("park", ["sleep", "keep"])
def test_a_workers_first_confirmed_trial_boots_the_studys_best_as_its_leader(tmp_path, park):
    """One worker measures a trial and stops (--max-trials 1); the next worker's first trial has no
    leader on its slot, so before its pairs it boots the study's best finished trial, as it ran (its
    own server asleep meanwhile, in sleep mode), and is measured against it, not alone."""
    record = tmp_path / "engines.jsonl"
    raw = _confirm_spec(2, f"study-leader-{park}", min_pairs=2, max_pairs=2, park=park, near=0.9)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    env = {"FAKE_ENGINE_RECORD": str(record), "FAKE_ENGINE_ITL_S": "0.004"}
    art = str(tmp_path / "art")
    nova_ok("create", str(spec), "--storage", url)
    first_out = nova_ok(
        "worker", raw["name"], "--storage", url, "--artifacts-dir", art, "--max-trials", "1", env=env
    )
    assert "booted as the leader" not in first_out  # the study's first trial: nothing to adopt
    out = nova_ok("worker", raw["name"], "--storage", url, "--artifacts-dir", art, env=env)
    assert "the study's best #0 booted as the leader" in out

    first, second = optuna.load_study(study_name=raw["name"], storage=url).get_trials()
    assert first.state == second.state == COMPLETE
    assert schema.PAIRED.read(first.user_attrs).leader is None  # confirmed alone
    p = schema.PAIRED.read(second.user_attrs)
    assert p is not None and p.leader == 0 and p.pairs == 2 and p.park == park
    assert all(len(lead) == len(mine) == 2 for lead, mine in p.levels.values())
    assert schema.TIMING.read(second.user_attrs)["leader_boot_s"] > 0  # counted as boot time
    assert (tmp_path / "art" / raw["name"] / "trial-0001" / "leader-server.log").exists()
    lives = engine_records(record)
    assert len(lives) == 3 and all(life.stop is not None for life in lives)  # none outlived its worker
    if park == "sleep":
        assert _awake_at_once(record) == 1  # the trial slept while the leader booted beside it
        assert (p.switch_s > 0) and "sleep" in record.read_text()
    else:
        assert "sleep" not in record.read_text()
