"""End to end on the real engine: vLLM's CPU build serving the tiny model, driven by the real CLI.

One study, five enqueued trials: the stock baseline, an n-gram speculative config, a suffix config the
compatibility table refuses without launching (arctic-inference is not in the engine's environment, and
the worker looked), a config that boots into a failure the table does not know (too little memory for
the KV cache: classified "oom" from the engine's own words, and PRUNED as infeasible), and another
config the table refuses.
Checks states, reasons, values, constraints, argv, the dashboard notes and graphs and the trials'
artifacts, and that no vLLM process is left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import optuna
import pytest

from nova_search import schema
from nova_search.db.budget import count_refused, count_toward_budget
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support import REPO

pytestmark = pytest.mark.engine


def test_study_on_real_engine(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    # a budget of 3 measurements: stock, n-gram and the OOM boot; the two configurations refused before
    # launch (suffix, the chunked-prefill rule) are counted apart, so the study holds 5 trials
    raw = tiny_spec(tiny_model, budget={"n_trials": 3})
    raw["space"]["speculative"]["method"] = {"choices": ["none", "ngram", "suffix"]}
    raw["space"]["gpu_memory_utilization"] = {"low": 0.0001, "high": 0.3}
    raw["sweep"]["repeats"] = 2
    raw["slo"] = {"ttft_ms": 60000}
    spec = parse_spec(raw)
    url = f"sqlite:///{tmp_path}/study.db"
    study = nova_study.create(spec, url, "e2e")
    base = {
        "kv_cache_dtype": "auto",
        "gpu_memory_utilization": 0.3,
        "max_num_seqs": 8,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
    }
    study.enqueue_trial(
        {
            **base,
            "max_num_batched_tokens": 1024,
            "spec_method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 3,
        }
    )
    study.enqueue_trial(
        {**base, "max_num_batched_tokens": 1024, "spec_method": "suffix", "num_speculative_tokens": 3}
    )
    # on the CPU the share of host memory: far too little for the weights and any KV cache
    study.enqueue_trial(
        {**base, "enable_chunked_prefill": False, "max_num_batched_tokens": 512, "spec_method": "none"}
    )
    study.enqueue_trial(
        {**base, "gpu_memory_utilization": 0.0001, "max_num_batched_tokens": 1024, "spec_method": "none"}
    )

    env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_search",
            "worker",
            "e2e",
            "--storage",
            url,
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    trials = optuna.load_study(study_name="e2e", storage=url).get_trials()
    assert len(trials) == 5
    stock, ngram, suffix, refused, oom = trials
    assert count_toward_budget(trials) == 3 and count_refused(trials) == 2

    # the stock baseline: engine.defaults only, nothing searched
    assert stock.state == optuna.trial.TrialState.COMPLETE
    assert stock.params == {}
    assert "--max-num-seqs" not in stock.user_attrs[schema.ARGV.key]

    # n-gram speculation: measured, values and constraints stored, exact argv recorded
    assert ngram.state == optuna.trial.TrialState.COMPLETE, ngram.user_attrs.get(schema.MESSAGE.key)
    argv = ngram.user_attrs[schema.ARGV.key]
    assert argv[:3] == [engine_python, "-m", "vllm.entrypoints.openai.api_server"]
    spec_json = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec_json == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 3,
    }
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert not any("api-key" in a for a in argv)
    assert ngram.user_attrs[schema.ENGINE_VERSION.key] == "0.32.0"
    levels = ngram.user_attrs[schema.LEVELS.key]
    assert [lv["concurrency"] for lv in levels] == [1, 2]
    for lv in levels:
        assert lv["completed"] == 12 and lv["errors"] == 0  # two windows of 6 requests
        assert lv["output_tokens"] == 12 * 24
        assert lv["goodput"] == pytest.approx(lv["request_throughput"])  # every request met a 60 s TTFT
        assert lv["output_throughput"] > 0 and lv["ttft_p50_ms"] > 0
        assert lv["spec_acceptance_rate"] is not None  # drafts were proposed and counted
    best_tput = max(lv["output_throughput"] for lv in levels)
    assert ngram.values[0] == pytest.approx(best_tput)
    assert ngram.values[1] == pytest.approx(levels[1]["ttft_p99_ms"])
    assert ngram.constraints == {"ttft_p99_ms<=60000@2": pytest.approx(levels[1]["ttft_p99_ms"] - 60000)}
    assert ngram.user_attrs[schema.TIMING.key]["boot_s"] > 1
    # repeated windows: per-window figures, a median interval per headline metric, the saturation read
    for c in ("1", "2"):
        assert len(ngram.user_attrs[schema.REPEATS.key][c]) == 2
        ci = ngram.user_attrs[schema.INTERVALS.key][c]["output_throughput"]
        assert ci["low"] <= ci["mid"] <= ci["high"]
    assert "limiter" in ngram.user_attrs[schema.SATURATION.key]

    # suffix decoding needs arctic-inference, which the engine's environment lacks: never launched
    assert suffix.state == optuna.trial.TrialState.PRUNED
    assert suffix.user_attrs[schema.REASON.key] == "incompatible"
    assert "suffix_needs_arctic_inference" in suffix.user_attrs[schema.MESSAGE.key]
    assert schema.ARGV.key not in suffix.user_attrs

    # a failure the table does not know: booted, failed, classified from the engine's own words; the
    # configuration is to blame, so it ends PRUNED and infeasible, where the sampler learns from it
    # (TPE never reads a FAIL trial)
    assert oom.state == optuna.trial.TrialState.PRUNED
    assert oom.user_attrs[schema.REASON.key] == "oom", oom.user_attrs.get(schema.LOG_TAIL.key, "")[-1500:]
    assert "Engine core initialization failed" in oom.user_attrs[schema.LOG_TAIL.key]
    assert oom.constraints == {"launchable": 1.0}
    assert suffix.constraints == {"launchable": 1.0}  # refused by the table: infeasible too

    # a combination the compatibility table knows is bad is never launched
    assert refused.state == optuna.trial.TrialState.PRUNED
    assert refused.user_attrs[schema.REASON.key] == "incompatible"
    assert "chunked_prefill_budget" in refused.user_attrs[schema.MESSAGE.key]
    assert schema.ARGV.key not in refused.user_attrs

    _check_dashboard_notes_and_artifacts(url, tmp_path / "artifacts", trials)
    assert "Pareto-optimal trials" in proc.stdout
    assert vllm_processes() - before == set()


def _check_dashboard_notes_and_artifacts(url, artifacts, trials):
    """Real trials get their optuna-dashboard note and their Optuna artifacts (request records, server
    log), and the study its note and graphs."""
    from optuna.artifacts import FileSystemArtifactStore, download_artifact, get_all_artifact_meta
    from optuna_dashboard import get_note

    study = optuna.load_study(study_name="e2e", storage=url)
    storage = study._storage
    stock, ngram, suffix, refused, oom = (optuna.Trial(study, t._trial_id) for t in trials)
    assert "## Trial 0: COMPLETE (stock)" in get_note(stock)
    note = get_note(ngram)
    assert "| acceptance |" in note and "vLLM 0.32.0" in note and "--speculative-config" in note
    assert "**incompatible**" in get_note(suffix) and "arctic-inference" in get_note(suffix)
    assert "**oom**" in get_note(oom) and "Engine core initialization failed" in get_note(oom)
    assert "**incompatible**" in get_note(refused)
    assert "stock: trial 0" in get_note(study)
    graphs = {k.split(":")[2] for k in storage.get_study_system_attrs(study._study_id) if "plot_data" in k}
    assert graphs == {"nova-throughput", "nova-latency", "nova-acceptance", "nova-user-gpu"}

    store = FileSystemArtifactStore(artifacts)
    metas = {m.filename: m for m in get_all_artifact_meta(trials[1], storage=storage)}
    assert set(metas) == {"requests.jsonl", "server.log"}
    download_artifact(artifact_store=store, artifact_id=metas["requests.jsonl"].artifact_id,
                      file_path=str(artifacts / "ngram-requests.jsonl"))  # fmt: skip
    rows = [json.loads(x) for x in (artifacts / "ngram-requests.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 * 6  # two levels, two windows of 6 requests
    assert {(r["level"], r["repeat"]) for r in rows} == {(1, 0), (1, 1), (2, 0), (2, 1)}
    assert all(r["success"] and r["output_tokens"] == 24 and r["ttft_ms"] > 0 for r in rows)
    failed = {m.filename: m for m in get_all_artifact_meta(trials[4], storage=storage)}  # the OOM boot
    download_artifact(artifact_store=store, artifact_id=failed["server.log"].artifact_id,
                      file_path=str(artifacts / "oom-server.log"))  # fmt: skip
    assert "less than requested memory" in (artifacts / "oom-server.log").read_text()
    for never_launched in (trials[2], trials[3]):  # suffix, the chunked-prefill rule
        assert get_all_artifact_meta(never_launched, storage=storage) == []


@pytest.mark.postgres
def test_two_workers_share_a_postgres_study_on_real_engine(engine_python, tiny_model, tmp_path):
    from nova_search.db import LevelStore
    from nova_search.testing.pg import fresh_database

    before = vllm_processes()
    raw = tiny_spec(tiny_model, budget={"n_trials": 2})  # a trial each
    raw["space"]["speculative"]["method"] = "none"
    raw["space"]["kv_cache_dtype"] = "auto"
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "pair")
        env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "nova_search",
                    "worker",
                    "pair",
                    "--storage",
                    url,
                    "--artifacts-dir",
                    str(tmp_path / f"a{i}"),
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(2)
        ]
        outs = [p.communicate(timeout=900)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
        trials = optuna.load_study(study_name="pair", storage=url).get_trials()
        assert len(trials) == 2
        assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2, [
            (t.user_attrs.get(schema.REASON.key), t.user_attrs.get(schema.MESSAGE.key)) for t in trials
        ]
        with LevelStore(url) as store:
            rows = store.rows("pair")
        assert len(rows) == 2 * 2
        assert {r["engine_version"] for r in rows} == {"0.32.0"}
        assert all(r["argv"][:3] == [engine_python, "-m", "vllm.entrypoints.openai.api_server"] for r in rows)
        assert all(r["output_throughput"] > 0 for r in rows)
    assert vllm_processes() - before == set()
