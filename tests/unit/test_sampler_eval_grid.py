"""``benchmarks/sampler_replay.py eval --grid`` (issue 55): a measured grid outside the evaluation set
gets the set's figure, one row an objective at each level with its verdict, in a table of its own;
a grid that lacks a configuration of its space, or a run without ``--out``, is refused by name and
writes nothing. The rows here are written by hand in ``measure``'s format (the engine test measures
a real grid and evaluates it the same way: tests/integration/test_sampler_replay.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

SPACE = {
    "kv_cache_dtype": ["auto", "fp8"],
    "max_num_seqs": [2, 8, 32],
    "enable_chunked_prefill": [True, False],
}


#: how ``measure`` records an fp8 configuration on a CPU without AVX-512: refused by a rule, before boot
FP8_REFUSED = (
    "fp8_kv_cache_on_cpu: FP8 KV cache on CPU requires x86 with AVX-512 or AMX; this CPU has neither"
)


def _grid(tmp_path: Path, short: bool = False, no_avx512: bool = False) -> tuple[Path, Path]:
    tmp_path.mkdir(exist_ok=True)
    spec = yaml.safe_load((REPO / "benchmarks" / "sampler_replay_levels.yaml").read_text())
    spec["space"] = {k: {"choices": v} for k, v in SPACE.items()}
    spec["space"]["max_num_batched_tokens"] = {"choices": [512]}
    spec_path = tmp_path / "grid.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    rows = []
    for kv in SPACE["kv_cache_dtype"]:
        for seqs in SPACE["max_num_seqs"]:
            for chunked in SPACE["enable_chunked_prefill"]:
                params = {"kv_cache_dtype": kv, "max_num_seqs": seqs, "enable_chunked_prefill": chunked}
                k = json.dumps(params, sort_keys=True)
                if not chunked:  # 512 < max_model_len: refused before boot, one row
                    rows.append({"pass": 1, "key": k, "params": params, "launchable": False, "reason": "r"})
                    continue
                if no_avx512 and kv == "fp8":
                    reason = FP8_REFUSED
                    rows.append(
                        {"pass": 1, "key": k, "params": params, "launchable": False, "reason": reason}
                    )
                    continue
                for level in (4, 16):
                    for p in (1, 2):
                        tput = 100.0 * seqs * (1.1 if kv == "fp8" else 1.0) * (1 + 0.01 * p) * level / 16
                        ttft = 1000.0 / seqs + level
                        rows.append(
                            {
                                "pass": p,
                                "key": k,
                                "params": params,
                                "host": "test",
                                "launchable": True,
                                "concurrency": level,
                                "completed": 8,
                                "output_throughput": tput,
                                "ttft_p99_ms": ttft,
                                "ttft_median_ms": ttft / 2,
                                "tpot_median_ms": seqs / 10,
                            }
                        )
    table = tmp_path / "measured" / "table.jsonl"
    table.parent.mkdir()
    if short:  # the first configuration, not measured at c=16
        rows = [r for r in rows if not (r["key"] == rows[0]["key"] and r.get("concurrency") == 16)]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return spec_path, table


def _eval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "benchmarks.sampler_replay", "eval", "--jobs", "1", *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_measured_grid_outside_the_set_gets_a_verdict_for_every_objective_at_every_level(tmp_path) -> None:
    spec, table = _grid(tmp_path)
    out = tmp_path / "eval"
    done = _eval("--grid", str(spec), str(table), "--out", str(out), "--seeds", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "results.json").read_text())
    names = {r["table"] for r in report["rows"]}
    objectives = (
        "output_throughput",
        "ttft_p99_ms",
        "ttft_median_ms",
        "tpot_median_ms",
        "cost",
        "slo_throughput",
    )
    assert names == {f"grid:measured/{o}@{c}" for o in objectives for c in (4, 16)}
    for r in report["rows"]:
        assert r["split"] == "unseen" and r["configurations"] == 12 and r["launchable"] == 6
        assert r["note"].startswith("measured: cpu (test), 2 passes")
        assert r["verdict"] == "met" or r["verdict"].startswith(("cannot:", "missed:"))
        for name in ("random", "random_no_repeat", "optuna_default", "nova_before", "nova"):
            assert r[name]["median_10"] <= r[name]["median_5"]
    best = next(r for r in report["rows"] if r["table"] == "grid:measured/output_throughput@16")
    assert best["within_5"] == 1 and best["random"]["chance_5"] == pytest.approx(1 / 12, abs=1e-5)  # fp8, 32
    assert best["passes_5"] == [1, 1, 1]  # each pass alone has the same best
    assert set(report["splits"]) == {"unseen"}
    md = (out / "table.md").read_text()
    assert "## measured grids outside the set (--grid), never tuned on (12 tables)" in md
    assert "median trials to within 10 % of the best" in md and md in done.stdout


def test_a_grid_short_of_a_configuration_or_without_out_is_refused_by_name(tmp_path) -> None:
    spec, table = _grid(tmp_path, short=True)
    out = tmp_path / "eval"
    short = _eval("--grid", str(spec), str(table), "--out", str(out), cwd=tmp_path)
    assert short.returncode != 0
    assert f"{table}: 1 of the 12 configurations of {spec}'s space are not in it at c=16" in short.stderr
    spec, table = _grid(tmp_path / "whole")
    no_out = _eval("--grid", str(spec), str(table), cwd=tmp_path)
    assert no_out.returncode != 0 and "--out: where to write the table of --grid's tables" in no_out.stderr
    nothing = _eval("--grid", str(spec), str(tmp_path / "none.jsonl"), "--out", str(out), cwd=tmp_path)
    assert nothing.returncode != 0 and "none.jsonl: no such file" in nothing.stderr
    bad = _eval("--grid", str(spec), str(table), "--out", str(out), "--seeds", "0", cwd=tmp_path)
    assert bad.returncode != 0 and "--seeds: 0; it must be at least 1" in bad.stderr
    assert not out.exists()  # nothing half-written


def test_a_grid_measured_where_the_hosts_rules_refused_fp8_is_replayed_with_those_refusals(tmp_path) -> None:
    """``measure`` asks the rules with its host's facts and records their answers, not the facts: a grid
    measured on a CPU without AVX-512 records its fp8 configurations as refused by
    ``fp8_kv_cache_on_cpu``. A worker on that host never proposes them, and neither does the replay."""
    from tests.support.scripts import benchmark_script

    spec_path, table_path = _grid(tmp_path, no_avx512=True)
    tables = benchmark_script("sampler_eval/tables.py")
    samplers = benchmark_script("sampler_eval/samplers.py")
    replay = benchmark_script("sampler_eval/replay.py")
    grid = tables.measured_grid_tables("grid:measured", spec_path, table_path)
    table = next(t for t in grid if t.objective == "output_throughput@16")
    assert table.facts is None and sum(not e.launchable for e in table.entries) == 9  # 6 chunked off, 3 fp8
    on_host = [replay.replay(table, samplers.nova(table, s)[0], 50) for s in range(6)]
    assert all(r.refused == 0 and r.found(50) for r in on_host), on_host
    blind = [replay.replay(table, samplers.off_host(table, s)[0], 50) for s in range(6)]
    assert sum(r.refused for r in blind) > 0  # the spec's rules alone let fp8 through


def test_the_one_grid_replay_refuses_what_the_grids_host_refused_too(tmp_path) -> None:
    """``sampler_replay replay`` (one grid, one level, output throughput) gives nova the same recorded
    refusals as ``eval --grid``: on a grid whose host refused fp8, nova spends no trial there."""
    spec, table = _grid(tmp_path, no_avx512=True)
    out = tmp_path / "replay"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "benchmarks.sampler_replay", "--spec", str(spec), "--table", str(table)]
    cmd += ["replay", "--level", "16", "--seeds", "6", "--out", str(out)]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tpe"]["median_refused"] == 0 and summary["tpe"]["not_found"] == 0
    assert summary["random"]["median_refused"] > 0  # random search draws fp8 and the chunked-off ones
