"""The sample trace replayed on the real engine: studies/tiny-cpu-trace.yaml (vLLM's CPU build serving
the tiny model), driven by the real CLI, end to end. One trial (stock; a drawn one boots the same way and
cost the engine tier 50 s more) measures the trace's slice at half, once and twice its rate; the levels
are those speeds, every request of every window completes on its own schedule, the server's prefix cache
hits exactly the blocks the trace's slice shares (at the engine's block size), the study stores the
trace's summary, and the report, policy and status read it. No vLLM process is left."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.loadgen.replay import first_index
from nova_search.loadgen.trace import read_trace
from nova_search.testing.workers import vllm_processes
from tests.support import REPO
from tests.support.cli import nova_ok

pytestmark = pytest.mark.engine


def slice_reuse(raw: dict, engine_block: int) -> float:
    """The share of a window's prompt tokens that a prefix cache of ``engine_block``-token blocks can
    hit: the leading hash_ids blocks an earlier request of the slice had, whole engine blocks of them,
    never the prompt's last token (vLLM's CPU build caches in blocks of 128, its GPU builds of 16)."""
    w = raw["workload"]
    trace = read_trace(str(REPO / w["path"]), "mooncake", w["block_size"])
    first = first_index(trace, w["trace_start_s"])
    seen: set[int] = set()
    hit = total = 0
    for i in range(first, first + raw["sweep"]["requests"]):
        n, ids = int(trace.input_len[i]), trace.hash_ids[i]
        shared = next((k for k, h in enumerate(ids) if h not in seen), len(ids))
        seen.update(ids)
        total += n
        hit += min(shared * w["block_size"] // engine_block, (n - 1) // engine_block) * engine_block
    return hit / total


def test_a_study_replays_the_sample_trace_on_the_real_engine(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    raw = yaml.safe_load((REPO / "studies" / "tiny-cpu-trace.yaml").read_text())
    raw["model"]["path"] = str(tiny_model)
    raw["budget"] = {"n_trials": 1}
    raw["artifacts_dir"] = str(tmp_path / "artifacts")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/study.db"
    env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python}
    proc = subprocess.run(
        [sys.executable, "-m", "nova_search", "run", str(spec), "--storage", url],
        cwd=REPO,  # the spec's trace path is relative to the repository
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    study = optuna.load_study(study_name="tiny-cpu-trace", storage=url)
    summary = schema.TRACE.read(study.user_attrs)
    assert summary is not None and summary["requests"] > 2000 and summary["block_size"] == 64
    trials = study.get_trials()
    assert len(trials) == 1
    stock = trials[0]
    assert stock.state == optuna.trial.TrialState.COMPLETE, stock.user_attrs.get(schema.MESSAGE.key)
    for t in trials:
        levels = schema.LEVELS.read(t.user_attrs)
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        assert [lv.concurrency for lv in levels] == [50, 100, 200]
        for lv in levels:
            assert lv.completed == 40 and lv.errors == 0, lv.first_errors
            assert lv.send_lag_p99_ms is not None and lv.send_lag_max_ms is not None
            # a late window would be flagged, never passed off as the trace's schedule
            assert lv.client_bound is not None
            assert not lv.client_bound or "fell behind" in lv.client_note or "core" in lv.client_note
        hits = {lv.prefix_cache_hit_rate for lv in levels}
        if hits != {None}:  # prefix caching on (vLLM's default): it finds exactly the slice's shared blocks
            assert all(any(abs(h - slice_reuse(raw, b)) < 1e-9 for b in (16, 128)) for h in hits), hits
        assert schema.SATURATION.read(t.user_attrs) is not None
    # the slice at twice the rate takes about half the time it takes at the trace's own
    slow, _, fast = schema.LEVELS.read(stock.user_attrs)
    assert fast.duration_s < slow.duration_s

    report = tmp_path / "report.html"
    nova_ok("report", "tiny-cpu-trace", "--storage", url, "-o", str(report))
    assert "The levels are speeds of this trace" in report.read_text()
    assert "What to deploy" in nova_ok("policy", "tiny-cpu-trace", "--storage", url)
    nova_ok("status", "tiny-cpu-trace", "--storage", url)
    assert vllm_processes() == before
