"""report.dashboard and nova_search.artifacts: notes and figures from hand-made StudyResults (pure),
then the writers against Optuna's in-memory storage (what they write, and that they never raise)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import optuna
import pytest
from optuna.artifacts import FileSystemArtifactStore, download_artifact, get_all_artifact_meta
from optuna_dashboard import get_note

from nova_search import schema
from nova_search.artifacts import append_jsonl, request_rows, upload_files
from nova_search.files import MAX_LOG_BYTES
from nova_search.knobs import EngineConfig
from nova_search.measure.records import RequestRecord
from nova_search.report.dashboard.graphs import (
    GRAPH_ACCEPTANCE,
    GRAPH_LATENCY,
    GRAPH_THROUGHPUT,
    GRAPH_USER_GPU,
    dashboard_figures,
)
from nova_search.report.dashboard.notes import study_note_markdown, trial_note_markdown
from nova_search.report.dashboard.publish import after_trial, refresh_dashboard, write_trial_note
from nova_search.report.data import trial_curves
from nova_search.results.decode import study_results
from nova_search.results.select import ranked_plain
from tests.support.builders import REPORT_OBJECTIVES as OBJECTIVES
from tests.support.builders import full_report_study
from tests.support.builders import level as lv
from tests.support.builders import report_study as study
from tests.support.builders import report_trial as mk

ARGV = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "1")


@pytest.fixture
def full():
    return full_report_study()


def table_rows(md: str, header_start: str) -> list[list[str]]:
    """The cells of the markdown table whose header row starts with ``header_start``."""
    lines = md.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2 :]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split(" | ")])
    return rows


# ---------------------------------------------------------------- trial note


def test_trial_note_of_a_speculative_trial(full):
    t = replace(full.trial(3), argv=ARGV, engine_version="0.32.0", timing={"boot_s": 12.5, "total_s": 40.0})
    md = trial_note_markdown(t, OBJECTIVES)
    assert md.startswith("## Trial 3: COMPLETE (search)")
    assert "max_num_seqs=16 spec=ngram/k3" in md
    assert "output_throughput@best = 700, ttft_p99_ms@8 = 90" in md
    assert "vLLM 0.32.0" in md and "boot 12.5 s" in md
    header = next(ln for ln in md.splitlines() if ln.startswith("| concurrency"))
    assert header.split(" | ")[-1] == "acceptance |"
    for name in ("output tok/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms"):
        assert name in header
    rows = table_rows(md, "| concurrency")
    assert [r[0] for r in rows] == ["1", "8"]
    c8 = rows[1]
    assert c8[1] == "700.0"  # output tok/s
    assert c8[3] == "90.0"  # TTFT p99
    assert c8[5] == "28.00"  # TPOT p99 (20 + concurrency)
    assert c8[8] == "0/10"  # errors / requests
    assert c8[9] == "93%" and c8[10] == "50%"  # KV peak, acceptance
    assert "```bash\npython -m vllm.entrypoints.openai.api_server --model /m --port 1\n```" in md
    assert "Why it ended" not in md


def test_trial_note_without_a_drafter_has_no_acceptance_column(full):
    md = trial_note_markdown(full.trial(1), OBJECTIVES)
    assert "acceptance" not in md
    assert len(table_rows(md, "| concurrency")[0]) == 10


def test_trial_note_of_failed_and_pruned_trials(full):
    failed = replace(
        full.trial(5),
        message="boom ``` inside\nline two " + "x" * 3000,
        log_tail="early\n" + "y" * 2000 + "\nlast line",
    )
    md = trial_note_markdown(failed, OBJECTIVES)
    assert "### Why it ended FAIL" in md and "**oom**" in md
    assert "boom ``` inside\nline two" in md
    assert "````\nboom" in md  # the fence is longer than any run of backticks in the message
    assert "x" * 1400 + " …" in md and "x" * 1500 not in md  # cut: the whole log is an artifact
    assert "objectives:" not in md  # a failed trial has no values
    assert "y" * 1400 + "\nlast line\n```" in md and "early" not in md  # the end of the server log
    assert table_rows(md, "| concurrency")[0][0] == "1"  # the level measured before it failed

    pruned = mk(6, [], state="PRUNED", reason="incompatible", message="fp8 | needs AVX-512")
    md = trial_note_markdown(pruned)
    assert "### Why it ended PRUNED" in md and "**incompatible**" in md and "fp8 | needs AVX-512" in md
    assert "| concurrency" not in md and "No level was measured" not in md
    assert "Launch command" in md  # mk gives every trial an argv
    assert "Launch command" not in trial_note_markdown(replace(pruned, argv=()))


def test_markdown_cells_escape_pipes(full):
    t = replace(full.trial(1), config=EngineConfig(attention_backend="a|b"))
    assert "attention_backend=a\\|b" in trial_note_markdown(t)


# ---------------------------------------------------------------- study note


def test_study_note_stock_vs_tuned_and_the_front(full):
    md = study_note_markdown(full)
    assert md.startswith("# rep\n")
    assert "6 trials: 5 COMPLETE, 1 FAIL" in md
    assert "`output_throughput@best` (maximize), `ttft_p99_ms@8` (minimize)" in md
    assert "stock: trial 0 · tuned: trial 1 (max_num_seqs=8 enable_prefix_caching=False)" in md
    rows = table_rows(md, "| concurrency")
    assert rows[0][:4] == ["1", "100.0", "110.0", "+10.0%"]
    assert rows[1][:6] == ["8", "400.0", "600.0", "+50.0%", "80.0", "60.0"]
    front = table_rows(md, "| trial")
    assert [r[0] for r in front] == ["3", "2"]  # best first by the first objective
    assert front[1][2:4] == ["500", "40"]
    assert "## Policy" not in md


def test_study_note_takes_the_policy_section(full):
    md = study_note_markdown(full, policy_markdown="## Policy\n\nconcurrency 1-8: trial 3\n")
    assert "## Policy\n\nconcurrency 1-8: trial 3" in md
    assert md.index("## Best trials") < md.index("## Policy")


def test_study_note_says_what_is_missing():
    md = study_note_markdown(study(mk(0, [lv(8, 20, 2)], state="FAIL", role="stock", reason="crash")))
    assert "No COMPLETE stock baseline and no feasible tuned trial yet." in md
    assert "No feasible COMPLETE trial yet." in md
    md = study_note_markdown(study(mk(0, [lv(8, 20, 2)], state="FAIL", role="stock"), mk(1, [lv(8, 30, 3)])))
    assert "stock: trial 0 ended FAIL · tuned: trial 1" in md
    assert table_rows(md, "| concurrency")[0][:4] == ["8", "–", "30.0", "–"]


# ---------------------------------------------------------------- figures


def test_curves_are_stock_tuned_and_runners_up(full):
    # non-speculative, feasible: the tuned baseline first; speculative 3 and infeasible 4 never count
    assert [t.number for t in ranked_plain(full)] == [1, 2, 0]
    curves = trial_curves(full, candidates=1)
    assert [(c.trial_number, c.kind, c.label) for c in curves] == [
        ("0", "stock", "stock (trial 0)"),
        ("1", "tuned", "tuned (trial 1)"),
        ("2", "candidate", "trial 2"),
    ]
    assert curves[1].points("output_throughput") == ((1, 8), (110, 600))


def test_dashboard_figures(full):
    figs = dashboard_figures(full)
    assert list(figs) == [GRAPH_THROUGHPUT, GRAPH_LATENCY, GRAPH_ACCEPTANCE, GRAPH_USER_GPU]
    tput = figs[GRAPH_THROUGHPUT]
    assert [t.name for t in tput.data] == ["stock (trial 0)", "tuned (trial 1)", "trial 2"]
    assert list(tput.data[1].x) == ["1", "8"] and list(tput.data[1].y) == [110, 600]
    lat = figs[GRAPH_LATENCY]
    titles = [a.text for a in lat.layout.annotations]
    assert titles == ["TTFT p99 (ms)", "TPOT p99 (ms)"]
    ttft = [t for t in lat.data if t.xaxis == "x"]
    tpot = [t for t in lat.data if t.xaxis == "x2"]
    assert [list(t.y) for t in ttft][:2] == [[20, 80], [18, 60]]
    assert [list(t.y) for t in tpot][0] == [21.0, 28.0]
    assert sum(bool(t.showlegend) for t in lat.data) == 3  # one legend entry per trial
    assert {t.line.color for t in ttft} == {t.line.color for t in tpot}
    acc = figs[GRAPH_ACCEPTANCE]
    assert [t.name for t in acc.data] == ["trial 3 (ngram/k3)"] and list(acc.data[0].y) == [0.6, 0.5]


def test_no_figures_without_measurements():
    assert dashboard_figures(study()) == {}
    no_drafter = dashboard_figures(study(mk(0, [lv(8, 20, 2)], role="stock")))
    assert set(no_drafter) == {GRAPH_THROUGHPUT, GRAPH_LATENCY, GRAPH_USER_GPU}


# ---------------------------------------------------------------- request records


def test_request_rows():
    ok = RequestRecord(
        send_time=10.5, end_time=11.0, success=True, prompt_tokens=64, output_tokens=3,
        chunk_times=(10.6, 10.8, 10.9), chunk_tokens=(1, 1, 1),
    )  # fmt: skip
    bad = RequestRecord(send_time=10.2, end_time=10.3, success=False, error="HTTP 500", status_code=500)
    rows = request_rows([ok, bad], level=8, repeat=1, origin=10.0)
    assert rows[0] == {
        "level": 8,
        "repeat": 1,
        "send_s": 0.2,
        "ttft_ms": None,
        "e2e_ms": None,
        "prompt_tokens": 0,
        "output_tokens": 0,
        "success": False,
        "error": "HTTP 500",
        "status": 500,
    }
    assert rows[1]["send_s"] == 0.5 and rows[1]["ttft_ms"] == pytest.approx(100.0)
    assert rows[1]["e2e_ms"] == pytest.approx(400.0) and rows[1]["output_tokens"] == 3


def test_append_jsonl_never_raises(tmp_path, caplog):
    path = tmp_path / "t" / "requests.jsonl"
    assert append_jsonl(path, [{"a": 1}]) and append_jsonl(path, [{"a": 2}, {"a": 3}])
    assert [json.loads(x)["a"] for x in path.read_text().splitlines()] == [1, 2, 3]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="nova_search"):
        assert append_jsonl(blocker / "requests.jsonl", [{"a": 1}]) is False
    assert "request records not written" in caplog.text


# ---------------------------------------------------------------- writers on a real (in-memory) study


def _study_with_trials(storage: str | None = None) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    s = optuna.create_study(directions=["maximize", "minimize"], storage=storage)
    s.set_metric_names([o.name for o in OBJECTIVES])
    trials = []
    for i, state in enumerate(("COMPLETE", "FAIL")):
        t = s.ask()
        schema.LEVELS.write(t, (lv(1, 100 + i, 20), lv(8, 400 + i, 80)))
        schema.ARGV.write(t, ARGV)
        schema.CONFIG.write(t, EngineConfig(max_num_seqs=8 + i))
        if state == "COMPLETE":
            s.tell(t, [400.0, 80.0])
        else:
            schema.REASON.write(t, "crash")
            schema.MESSAGE.write(t, "the server died during concurrency 8")
            s.tell(t, state=optuna.trial.TrialState.FAIL)
        trials.append(s.trials[t.number])
    return s, trials


def test_after_trial_writes_the_trial_note_the_study_note_and_the_graphs():
    s, (done, failed) = _study_with_trials()
    assert after_trial(s, done) and after_trial(s, failed)
    note = lambda t: get_note(optuna.trial.Trial(s, t._trial_id))  # noqa: E731
    assert "| 8 | 400.0 |" in note(done)
    assert "**crash**" in note(failed) and "the server died during concurrency 8" in note(failed)
    assert get_note(s).startswith(f"# {s.study_name}\n") and "2 trials: 1 COMPLETE, 1 FAIL" in get_note(s)
    attrs = s._storage.get_study_system_attrs(s._study_id)
    graphs = {k.split(":")[2] for k in attrs if k.startswith("dashboard:plot_data:")}
    assert graphs == {GRAPH_THROUGHPUT, GRAPH_LATENCY, GRAPH_USER_GPU}
    # a second refresh overwrites the graphs in place
    refresh_dashboard(s, study_results(s, "memory"))
    assert {k for k in s._storage.get_study_system_attrs(s._study_id) if "plot_data" in k} == {
        k for k in attrs if "plot_data" in k
    }


def test_one_worker_writes_the_notes_the_others_leave_their_trials_to_it(tmp_path, monkeypatch):
    """The elected writer (a lock only tried): a worker that finds the notes being written writes
    nothing and leaves its trial to the writer's next pass; the end of the stage writes what is left."""
    import threading

    import nova_search.report.dashboard.publish as dashboard
    from nova_search.db import StorageLock

    s, (done, failed) = _study_with_trials(f"sqlite:///{tmp_path / 'notes.db'}")
    writes = []
    real = dashboard.write_trial_note
    monkeypatch.setattr(
        dashboard, "write_trial_note", lambda st, t, *a: (writes.append(t.number), real(st, t, *a))
    )
    held = StorageLock(s._storage._backend.engine, f"{s.study_name}#notes")
    assert held.attempt()  # another worker is writing
    assert after_trial(s, done) is True and writes == []  # left to that worker
    assert get_note(s) == ""
    held.release()
    assert after_trial(s, failed) is True and sorted(writes) == [0, 1]  # both, in one pass
    assert "2 trials: 1 COMPLETE, 1 FAIL" in get_note(s)
    assert schema.NOTED.read(s._storage.get_study_system_attrs(s._study_id)) == (0, 1)
    assert after_trial(s, failed) is True and sorted(writes) == [0, 1]  # nothing new: nothing written
    # a trial told while another writes, at the end of the stage: after_stage waits for it, then writes
    t = s.ask()
    schema.LEVELS.write(t, (lv(1, 90, 20),))
    s.tell(t, [90.0, 20.0])
    assert held.attempt()
    threading.Timer(1.5, held.release).start()
    assert dashboard.after_stage(s) is True and sorted(writes) == [0, 1, 2]
    assert "3 trials" in get_note(s)


def test_the_writers_raise_and_after_trial_warns_once(caplog, monkeypatch):
    import nova_search.report.dashboard.publish as dashboard

    s, (done, _failed) = _study_with_trials()
    results = study_results(s, "memory")

    def broken(*args, **kwargs):
        raise RuntimeError("database is away")

    monkeypatch.setattr(s._storage, "set_study_system_attr", broken)
    monkeypatch.setattr(dashboard, "_said", set())
    with pytest.raises(RuntimeError):
        write_trial_note(s, results.trial(0), done._trial_id, results.objectives)
    with pytest.raises(RuntimeError):
        refresh_dashboard(s, results)
    with caplog.at_level(logging.WARNING, logger="nova_search"):
        assert after_trial(s, done) is False
        assert after_trial(s, done) is False
    assert caplog.text.count("database is away") == 1  # warned once, visibly


def test_upload_files_attaches_artifacts_to_the_running_trial(tmp_path, caplog):
    s = optuna.create_study()
    t = s.ask()
    store = FileSystemArtifactStore(tmp_path / "store")
    (tmp_path / "store").mkdir()
    (tmp_path / "requests.jsonl").write_text('{"level":1}\n')
    (tmp_path / "server.log").write_text("INFO started\n")
    ids = upload_files(t, store, [tmp_path / "requests.jsonl", tmp_path / "server.log", tmp_path / "missing"])
    assert set(ids) == {"requests.jsonl", "server.log"}
    metas = {m.filename: m for m in get_all_artifact_meta(t, storage=s._storage)}
    assert metas["requests.jsonl"].mimetype == "application/x-ndjson"
    assert metas["server.log"].mimetype == "text/plain"
    download_artifact(artifact_store=store, artifact_id=ids["server.log"], file_path=str(tmp_path / "back"))
    assert (tmp_path / "back").read_text() == "INFO started\n"

    class Broken:
        def write(self, artifact_id, content_body):
            raise OSError("disk full")

    with caplog.at_level(logging.WARNING, logger="nova_search"):
        assert upload_files(t, Broken(), [tmp_path / "server.log"]) == {}
    assert "disk full" in caplog.text


def test_a_log_over_the_cap_is_uploaded_capped_under_its_own_name(tmp_path):
    """A leader's server still runs when its trial's files go up: its log is capped on the way (issue
    53), head and tail kept, under its own name; the file itself is left to its server's stop."""
    s = optuna.create_study()
    t = s.ask()
    (tmp_path / "store").mkdir()
    store = FileSystemArtifactStore(tmp_path / "store")
    log = tmp_path / "leader-server.log"
    log.write_bytes(b"START\n" + b"x" * (MAX_LOG_BYTES + (3 << 20)) + b"\nEND\n")
    ids = upload_files(t, store, [log])
    back = tmp_path / "back"
    download_artifact(artifact_store=store, artifact_id=ids["leader-server.log"], file_path=str(back))
    data = back.read_bytes()
    assert len(data) <= MAX_LOG_BYTES + 200 and data.startswith(b"START") and data.endswith(b"END\n")
    assert b"bytes of this log left out" in data
    assert {m.filename for m in get_all_artifact_meta(t, storage=s._storage)} == {"leader-server.log"}
    assert log.stat().st_size > MAX_LOG_BYTES and not (tmp_path / ".nova-upload").exists()
