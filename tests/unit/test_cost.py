"""Where a study's GPU time went (results.cost), and every reader that shows it."""

from __future__ import annotations

import pytest
from markupsafe import escape
from rich.console import Console

from nova_search.report.dashboard.notes import study_note_markdown
from nova_search.report.data import build_report_data
from nova_search.report.html.render import render_html
from nova_search.report.progress import pareto_table
from nova_search.report.status import status_lines
from nova_search.results.cost import gpu_time, trial_gpu_time
from nova_search.results.serialize import study_dict
from nova_search.results.standing import study_status
from tests.support.builders import level, study, trial


def launched(number: int, boot: float, windows: float, total: float, tp: int = 1, tok_s: float = 100.0):
    return trial(
        number,
        [level(1, tok_s)],
        config={"max_num_seqs": 8 * (number + 1), "tensor_parallel_size": tp},
        timing={"boot_s": boot, "measure_s": windows, "total_s": total},
    )


def test_each_trial_counts_its_windows_boot_and_the_rest_once_per_gpu() -> None:
    assert trial_gpu_time(launched(0, 80.0, 30.0, 120.0)) == {
        "windows": 30.0,
        "boot": 80.0,
        "failed_boot": 0.0,
        "other": pytest.approx(10.0),
    }
    # a tensor-parallel server holds two GPUs for every second
    assert trial_gpu_time(launched(1, 80.0, 30.0, 120.0, tp=2))["boot"] == 160.0
    # the server never came up: no boot_s, all of it a failed boot
    failed = trial(2, state="FAIL", timing={"total_s": 95.0})
    assert trial_gpu_time(failed) == {"windows": 0.0, "boot": 0.0, "failed_boot": 95.0, "other": 0.0}
    # pruned before launch: held no GPU
    assert set(trial_gpu_time(trial(3, state="PRUNED")).values()) == {0.0}
    # a drafter that booted the tuned baseline as its leader first: both boots are boot time
    adopted = trial(4, timing={"boot_s": 80.0, "leader_boot_s": 70.0, "measure_s": 30.0, "total_s": 200.0})
    split = trial_gpu_time(adopted)
    assert split["boot"] == 150.0 and split["other"] == pytest.approx(20.0)


def test_the_study_split_and_the_gpu_hours_per_trial_on_the_front() -> None:
    s = study(
        launched(0, 80.0, 30.0, 120.0, tok_s=100.0),
        launched(1, 60.0, 30.0, 100.0, tok_s=200.0),
        trial(2, state="FAIL", timing={"total_s": 40.0}),
        trial(3, state="PRUNED"),
        spec={"budget": {"n_trials": 4}, "engine": {"device": "cuda"}},
    )
    g = gpu_time(s)
    assert g.seconds() == {"windows": 60.0, "boot": 140.0, "failed_boot": 40.0, "other": pytest.approx(20.0)}
    assert g.total == pytest.approx(260.0) and g.share("windows") == pytest.approx(60 / 260)
    assert g.front_trials == len(s.pareto()) >= 1
    assert g.hours_per_front_trial == pytest.approx(260 / 3600 / g.front_trials)
    assert g.text().startswith("GPU time: 260 s (0.0722 GPU-h): windows 23%, boots 54%, failed boots 15%")
    assert gpu_time(study(spec={"engine": {"device": "cpu"}})).text() == "engine time: nothing launched yet"


def test_status_report_dashboard_note_and_dump_show_it() -> None:
    s = study(launched(0, 80.0, 30.0, 120.0), trial(1, state="FAIL", timing={"total_s": 40.0}))
    line = gpu_time(s).text()
    assert line.startswith("GPU time: 160 s")
    assert line in status_lines(study_status(s))
    assert line in study_note_markdown(s)
    page = render_html(build_report_data(s))
    assert "Search cost: where the GPU time went" in page and "failed boots" in page
    assert study_dict(s)["gpu_time_s"] == {"windows": 30.0, "boot": 80.0, "failed_boot": 40.0, "other": 10.0}


def test_throughput_is_reported_per_gpu_as_well_as_per_server() -> None:
    """A TP=2 server that delivers 1.5x a single-GPU one leads per server and trails per GPU: status,
    the report's trial table and the final Pareto table give both."""
    one = launched(0, 60.0, 30.0, 100.0, tok_s=1000.0)
    two = launched(1, 60.0, 30.0, 100.0, tp=2, tok_s=1500.0)
    assert (one.gpus, one.peak_throughput, one.peak_throughput_per_gpu) == (1, 1000.0, 1000.0)
    assert (two.gpus, two.peak_throughput, two.peak_throughput_per_gpu) == (2, 1500.0, 750.0)
    results = study(one, two)
    lines = status_lines(study_status(results))
    assert "  output_throughput@best (max): 1500 (trial 1, 2 GPUs; 750 per GPU)" in lines
    rows = {r.number: r for r in build_report_data(results).trials}
    assert (rows["1"].gpus, rows["1"].peak_tok_s, rows["1"].peak_tok_s_per_gpu) == (2, 1500.0, 750.0)
    assert "peak out tok/s per GPU" in render_html(build_report_data(results))
    console = Console(record=True, width=200)
    console.print(pareto_table(results))
    text = console.export_text()
    assert "peak tok/s per GPU" in text and "750" in text


def test_how_busy_each_gpu_was_over_the_study() -> None:
    """Each GPU's held seconds (every trial's run charged to the GPUs its server held) against the
    study's span, in status, the report and the dashboard note; nothing where no trial names a GPU."""

    def on(number: int, gpus: tuple[int, ...], start_s: float, run_s: float):
        return trial(
            number,
            [level(1, 100.0)],
            config={"tensor_parallel_size": len(gpus)},
            timing={"boot_s": 10.0, "measure_s": 20.0, "total_s": run_s},
            worker=("x2", gpus),
            start_s=start_s,
            took_s=run_s,
        )

    s = study(on(0, (0,), 0, 100.0), on(1, (1,), 0, 50.0), on(2, (0, 1), 100, 100.0))
    g = gpu_time(s)
    assert g.held == ((0, 200.0), (1, 150.0)) and g.span_s == 200.0
    line = "GPUs held by a server: GPU 0 100% (200 s), GPU 1 75% (150 s) of the study's 200 s"
    assert g.held_text() == line
    assert line in status_lines(study_status(s))
    assert line in study_note_markdown(s)
    assert str(escape(line)) in render_html(build_report_data(s))  # as the report's templates escape it
    assert gpu_time(study(launched(0, 80.0, 30.0, 120.0))).held_text() is None


def test_a_pause_between_sessions_is_not_counted_as_idle_gpu_time() -> None:
    """A study stopped and continued a day later (the H200 confirm study): its GPU was busy while it
    ran, not 7 % of the wall time between its first and last trial."""

    def on(number: int, start_s: float, run_s: float):
        return trial(
            number,
            [level(1, 100.0)],
            timing={"boot_s": 10.0, "measure_s": 20.0, "total_s": run_s},
            worker=("h200", (0,)),
            start_s=start_s,
            took_s=run_s,
        )

    day = 86_400.0
    g = gpu_time(study(on(0, 0, 100.0), on(1, 110, 100.0), on(2, day, 100.0), on(3, day + 1100, 100.0)))
    assert g.pauses == 2 and g.span_s == pytest.approx(210.0 + 100.0 + 100.0)
    assert g.held_text() == (
        "GPUs held by a server: GPU 0 98% (400 s) of the study's 410 s (2 pauses of 15 min or more left out)"
    )
