"""Synthetic acceptance end to end on the stand-in engine (launched by nova-search as vLLM is): a staged
study whose drafter carries ``acceptance: {length: 2.5}`` passes the profile to the engine, and every
output says "projected at acceptance L=2.5": the verdict, the policy, the stored deploy answer, dump
(JSON and CSV), status, the report, the dashboard's trial note; export drops the profile and says why
unless --keep-synthetic-acceptance. The stand-in is faster with --speculative-config
(FAKE_ENGINE_FAST_WITH), so the drafter is verified better and the policy has a speculative range; its
greedy output differs under the synthetic profile, as vLLM's does, and is not held against it."""

from __future__ import annotations

import json

import optuna
import yaml

from nova_search import schema
from nova_search.testing.specs import minimal_spec_dict
from tests.support.cli import nova, nova_ok

LABEL = "projected at acceptance L=2.5"


def test_a_projected_study_says_so_everywhere(tmp_path):
    raw = minimal_spec_dict(
        name="proj",
        stages=["tune", "speculative"],
        space={
            "max_num_seqs": {"choices": [4, 8]},
            "speculative": {
                "method": "draft_model",
                "num_speculative_tokens": 3,
                "drafters": {"draft_model": "fake-drafter"},
                "acceptance": {"draft_model": {"length": 2.5}},
            },
        },
        workload={"input_len": 16, "output_len": 48},
        sweep={"concurrency": [1, 2], "requests": 6, "warmup_requests": 1, "repeats": 3},
        budget={"n_trials": 1, "per_stage": {"tune": 1, "speculative": 2}},
    )
    raw["engine"]["env"]["FAKE_ENGINE_FAST_WITH"] = "--speculative-config"
    raw["engine"]["device"] = "cuda"  # the CPU build refuses synthetic acceptance (see the engine test)
    spec = tmp_path / "proj.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    env = {"FAKE_ENGINE_ITL_S": "0.004"}
    r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the worker's progress lines and final tables
    assert "projected_at_acceptance=2.5" in r.stdout + r.stderr
    assert f"PROJECTED ({LABEL})" in r.stdout + r.stderr

    # the engine was given the profile
    spec_study = optuna.load_study(study_name="proj.speculative", storage=url)
    drafted = [t for t in spec_study.get_trials() if "--speculative-config" in schema.ARGV.read(t.user_attrs)]
    assert drafted
    argv = schema.ARGV.read(drafted[0].user_attrs)
    payload = json.loads(argv[argv.index("--speculative-config") + 1])
    assert payload["rejection_sample_method"] == "synthetic" and payload["synthetic_acceptance_length"] == 2.5

    # as vLLM's synthetic rejection sampler does, the profile changed the greedy output (the stand-in
    # shifts its tokens under it); a projected trial's output is not judged against tuned, so the
    # drafter is not flagged for it (the H100 study's EAGLE-3 was, before: "every drafter's greedy
    # output diverged from tuned")
    tuned = next(t for t in spec_study.get_trials() if schema.ROLE.read(t.user_attrs) == "tuned")
    ours, theirs = (schema.REFERENCE.read(t.user_attrs) for t in (drafted[0], tuned))
    assert ours is not None and theirs is not None and ours.ok and theirs.ok
    assert ours.token_ids != theirs.token_ids

    # the verdict, the policy and the deploy answer
    policy = json.loads(nova_ok("policy", "proj", "--storage", url, "--format", "json"))
    (d,) = policy["drafters"]
    assert d["projected"] == LABEL and d["reason"].startswith(LABEL), d
    assert d["status"] == "accepted", d["reason"]
    spec_ranges = [r for r in policy["policy"] if r["choice"] == "speculative"]
    assert spec_ranges and all(r["projected"] == LABEL for r in spec_ranges)
    deployed = [r for r in policy["ranges"] if r["configuration"]["choice"] == "speculative"]
    assert deployed and all(
        r["projected"] == LABEL and r["configuration"]["projected"] == LABEL for r in deployed
    )
    assert all(r["evidence"]["text"].startswith(LABEL) for r in deployed)
    # the command to run carries the drafter, not the synthetic profile (a measurement's, not a server's)
    assert all("--speculative-config" in r["argv"] and "synthetic" not in r["command"] for r in deployed)
    assert policy["projected"] == [LABEL]
    assert any(n.startswith("projected: draft_model") for n in policy["notes"])
    table = nova_ok("policy", "proj", "--storage", url)
    assert "PROJECTED, not measured" in table and LABEL in table
    # the answer stored for scripts (nova:deploy), as a worker wrote it when the stage ended
    stored = optuna.load_study(study_name="proj.speculative", storage=url).user_attrs[schema.DEPLOY.key]
    assert stored["projected"] == [LABEL]

    # dump rows, JSON and CSV
    dump = json.loads(nova_ok("dump", "proj", "--storage", url))
    trials = dump["trials"]
    assert {t["projected"] for t in trials if (t["config"] or {}).get("speculative")} == {LABEL}
    assert {t["projected"] for t in trials if not (t["config"] or {}).get("speculative")} == {None}
    csv = nova_ok("dump", "proj", "--storage", url, "--format", "csv")
    assert "projected" in csv.splitlines()[0] and LABEL in csv

    # status lines (the best so far is the drafter) and the report
    status = nova_ok("status", "proj", "--storage", url)
    assert LABEL in status and "PROJECTED, not measured" in status
    report = tmp_path / "report.html"
    nova_ok("report", "proj", "--storage", url, "-o", str(report))
    html = report.read_text()
    assert LABEL in html and "PROJECTED, not measured" in html

    # the dashboard's trial note
    from optuna_dashboard import get_note

    assert LABEL in get_note(optuna.Trial(spec_study, drafted[0]._trial_id))
    assert "projected at acceptance" in get_note(spec_study)  # the study note: verdict and answer

    # export drops the profile, in the header and on stderr, unless asked
    r = nova("export", "proj", "--storage", url, "--model", "real/model", "--concurrency", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    command = [line for line in r.stdout.splitlines() if line.startswith("vllm ")]
    assert command and "synthetic" not in command[0] and "--speculative-config" in command[0]
    assert any(
        line.startswith("#") and "synthetic acceptance (length 2.5) dropped" in line
        for line in r.stdout.splitlines()
    )
    assert "synthetic acceptance (length 2.5) dropped" in r.stderr
    kept = nova_ok(
        "export",
        "proj",
        "--storage",
        url,
        "--model",
        "real/model",
        "--concurrency",
        "1",
        "--keep-synthetic-acceptance",
    )
    assert '"rejection_sample_method":"synthetic"' in kept and "synthetic acceptance kept" in kept

    # the break-even rows of the study (results.speculation.breakeven_rows), through the driver
    import subprocess
    import sys

    from tests.support.cli import REPO

    out = tmp_path / "map"
    argv = [sys.executable, "-m", "benchmarks.breakeven_h200", "study", "--storage", url, "--study", "proj"]
    r = subprocess.run([*argv, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert {(p["method"], p["k"]) for p in summary["break_even"]} == {("draft_model", 3)}
    assert {g[0] for p in summary["break_even"] for g in p["gains"]} == {2.5}  # the length asked
    assert sorted(p["concurrency"] for p in summary["break_even"]) == [1, 2]


def test_the_breakeven_driver_runs_abba_windows_on_the_standin(tmp_path):
    """benchmarks/breakeven_h200.py, dry: the stand-in in place of vLLM (faster with a drafter), one
    length, ABBA pairs against the resident tuned server, rows and the summary written."""
    import subprocess
    import sys

    from tests.support.cli import REPO

    out = tmp_path / "be"
    argv = [
        sys.executable, "-m", "benchmarks.breakeven_h200", "map",
        "--serve-cmd", f"{sys.executable} -m nova_search.testing.fake_engine", "--model", "fake",
        "--method", "eagle3", "--drafter", "d", "--k", "3", "--levels", "1", "--pairs", "3",
        "--input-len", "16", "--output-len", "32", "--requests-per-level", "4", "--lengths", "2.5",
        "--out", str(out),
    ]  # fmt: skip
    env = {**__import__("os").environ, "FAKE_ENGINE_FAST_WITH": "--speculative-config"}
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (row,) = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert row["length"] == 2.5 and row["n"] == 3 and row["verdict"] == "verified_gain"
    windows = [json.loads(x) for x in (out / "windows.jsonl").read_text().splitlines()]
    assert [w["server"] for w in windows] == ["T", "D", "D", "T", "T", "D"]  # ABBA
    servers = [json.loads(x) for x in (out / "servers.jsonl").read_text().splitlines()]
    spec = json.loads(servers[1]["argv"][servers[1]["argv"].index("--speculative-config") + 1])
    assert spec["rejection_sample_method"] == "synthetic" and spec["synthetic_acceptance_length"] == 2.5
    summary = json.loads((out / "summary.json").read_text())
    assert summary["break_even"][0]["text"] == "<= 2.5"
    assert "Break-even map (projected)" in (out / "breakeven.md").read_text()
