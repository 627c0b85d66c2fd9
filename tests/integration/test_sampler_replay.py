"""The sampler replay benchmark (benchmarks/sampler_replay.py) end to end on the real CPU engine: its
``measure`` step boots vLLM through nova's launcher for each configuration of a small grid, measures
it with ``vllm bench serve`` at each level on one boot, and records a configuration nova's
compatibility table refuses without booting it; its ``replay`` step reads that table at a level and
writes the summary in the issue's format."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.support import REPO

pytestmark = pytest.mark.engine


def test_measure_boots_the_grid_with_novas_launcher_and_replay_summarises_it(
    engine_python, tiny_model, tmp_path
):
    spec = yaml.safe_load((REPO / "benchmarks" / "sampler_replay.yaml").read_text())
    spec["model"]["path"] = str(tiny_model)
    spec["space"] = {
        "max_num_seqs": {"choices": [4]},
        "max_num_batched_tokens": {"choices": [512]},
        "enable_chunked_prefill": {"choices": [True, False]},  # False: refused (512 < max_model_len)
    }
    spec["sweep"].update(requests=16, warmup_requests=2, concurrency=[4, 2])
    spec["objectives"][0]["at"] = 4
    spec_path = tmp_path / "grid.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    table = tmp_path / "table.jsonl"
    env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python, "PYTHONPATH": str(REPO)}
    base = ["--spec", str(spec_path), "--table", str(table)]

    def replay(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "benchmarks.sampler_replay", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)

    measured = replay(*base, "measure", "--passes", "1", timeout=600)
    assert measured.returncode == 0, measured.stdout + measured.stderr
    written = [json.loads(line) for line in table.read_text().splitlines()]
    refused = [r for r in written if not r["params"]["enable_chunked_prefill"]]
    booted = [r for r in written if r["params"]["enable_chunked_prefill"]]
    assert [r["concurrency"] for r in booted] == [2, 4]  # one boot, each level, lowest first
    assert len({r["boot_s"] for r in booted}) == 1 and booted[0]["boot_s"] > 0
    for r in booted:
        assert r["launchable"] and r["completed"] == 16
        assert r["output_throughput"] > 0 and r["ttft_p99_ms"] >= r["ttft_median_ms"] > 0
    assert len(refused) == 1 and not refused[0]["launchable"]  # one row: it answers for every level
    assert refused[0]["reason"].startswith("chunked_prefill_budget:")
    assert "boot_s" not in refused[0]  # refused before boot, as a worker refuses it

    again = replay(*base, "measure", "--passes", "1", timeout=600)
    assert again.returncode == 0 and len(table.read_text().splitlines()) == 3  # nothing measured twice

    unmeasured = replay(*base, "replay", "--level", "8")
    assert unmeasured.returncode != 0 and "--level 8: the table was measured at 2, 4" in unmeasured.stderr

    out = tmp_path / "results"
    replayed = replay(*base, "replay", "--level", "4", "--seeds", "3", "--trials", "4", "--out", str(out))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["table"]["launchable"] == 1 and summary["table"]["configurations"] == 2
    assert summary["table"]["concurrency"] == 4
    # random search's exact figure beside the replayed one: one draw of two lands, so 1 at the median
    assert summary["random_exact"] == {"median_trials": 1.0, "iqr": [1.0, 2.0], "chance": 0.5}
    assert summary["tpe_over_random_exact"] == summary["tpe"]["median_trials"]
    for name in ("tpe", "random", "grid"):
        # one launchable configuration of two: found by the first or second trial, every seed
        assert summary[name]["not_found"] == 0 and summary[name]["median_trials"] in (1, 1.5, 2)

    # the evaluation set's figure on this grid (eval --grid): each objective at each level, a verdict each
    evaluated = tmp_path / "eval"
    grid_eval = replay(
        "eval", "--grid", str(spec_path), str(table), "--out", str(evaluated), "--seeds", "2", "--jobs", "1"
    )
    assert grid_eval.returncode == 0, grid_eval.stdout + grid_eval.stderr
    report = json.loads((evaluated / "results.json").read_text())
    assert {r["table"] for r in report["rows"]} >= {
        f"grid:{tmp_path.name}/output_throughput@{c}" for c in (2, 4)
    }
    for r in report["rows"]:
        # one launchable configuration of two: random needs 1 or 2 trials, too few to halve
        assert r["configurations"] == 2 and r["launchable"] == 1 and r["verdict"].startswith("cannot:")
