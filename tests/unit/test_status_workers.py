"""``status`` (issue 39, item 4): workers are told apart by host and pid, an idle one is said to be
waiting or exited, and the ETA is timed over launched trials only (a configuration refused before
launch takes seconds and no budget: it once made the ETA read 0s)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from nova_search.report.status import status_lines
from nova_search.results.standing import study_status
from nova_search.schema import WorkerTag
from tests.support.builders import T0, study, trial


def _refused(number: int, worker: WorkerTag):
    t = trial(number, state="PRUNED", worker=worker, start_s=60 * number, took_s=0.1)
    return replace(t, reason="incompatible", message="chunked_prefill_budget: ...")


def test_two_workers_of_one_host_are_two_and_the_eta_ignores_refused_trials() -> None:
    a, b = WorkerTag("node1", (0,), 101), WorkerTag("node1", (0,), 202)
    trials = [
        trial(0, worker=a, start_s=0, took_s=600),
        _refused(1, b),
        _refused(2, b),
        trial(3, state="RUNNING", worker=a, start_s=700, took_s=None),
        trial(4, state="RUNNING", worker=b, start_s=700, took_s=None),
    ]
    s = study(*trials, budget=6)
    s = replace(s, budget_used=3)  # the refused trials do not count (db.count_toward_budget)
    now = T0 + timedelta(seconds=800)
    st = study_status(s, now=now, alive=lambda host, pid: True)
    assert st.active_slots == 2 and len(st.workers) == 2
    assert st.mean_trial_s == 600.0  # the launched trial only: refused ones took 0.1 s
    # (3 remaining x 600 s + 2 running trials with 500 s left each) / 2 slots
    assert st.eta_s == (3 * 600 + 500 + 500) / 2
    lines = status_lines(st, now=now)
    assert "  node1 pid 101 [gpus 0]: running trial 3, 1 finished recently, last seen 0s ago" in lines
    assert "  node1 pid 202 [gpus 0]: running trial 4, 2 finished recently, last seen 0s ago" in lines
    assert lines[0].endswith("budget 6, used 3 (2 configuration(s) refused before launch, not counted)")


def test_an_idle_worker_is_waiting_or_exited() -> None:
    a, b = WorkerTag("node1", (0,), 101), WorkerTag("node1", (1,), 202)
    trials = [
        trial(0, worker=a, start_s=0, took_s=60),
        trial(1, worker=b, start_s=0, took_s=60),
        trial(2, state="RUNNING", worker=b, start_s=100, took_s=None),
    ]
    s = replace(study(*trials, budget=3), budget_used=3)
    now = T0 + timedelta(seconds=200)
    waiting = status_lines(study_status(s, now=now, alive=lambda h, pid: True), now=now)
    assert any(line.startswith("  node1 pid 101 [gpus 0]: waiting (budget used up") for line in waiting)
    gone = status_lines(study_status(s, now=now, alive=lambda h, pid: pid != 101), now=now)
    assert any(line.startswith("  node1 pid 101 [gpus 0]: exited,") for line in gone), gone
    elsewhere = status_lines(study_status(s, now=now, alive=lambda h, pid: None), now=now)
    assert any(line.startswith("  node1 pid 101 [gpus 0]: idle,") for line in elsewhere), elsewhere
