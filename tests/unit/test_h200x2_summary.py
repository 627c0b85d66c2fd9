"""benchmarks/h200x2/summarize.py, the summary the x2 run (issue 12) is judged by: GPU time charged to the
GPUs each trial's server held, two trials on one GPU at once caught, the killed trial's retry found."""

from __future__ import annotations

from pathlib import Path

from tests.support.scripts import benchmark_script

summarize = benchmark_script("h200x2/summarize.py").summarize


def trial(
    number: int, gpus: list[int], start: str, end: str, state: str = "COMPLETE", **more: object
) -> dict:
    return {
        "number": number,
        "state": state,
        "worker": {"host": "x2", "gpus": gpus},
        "config": {"tensor_parallel_size": len(gpus) if len(gpus) > 1 else None},
        "datetime_start": f"2026-12-01T00:{start}",
        "datetime_complete": f"2026-12-01T00:{end}",
        "retry_of": None,
        **more,
    }


def test_gpu_time_overlaps_and_the_retry(tmp_path: Path) -> None:
    (tmp_path / "killed").write_text("1796085543 SIGKILL worker pid 1 (GPU 1), its trial 60 s in\n")
    dump = {
        "study": "s",
        "budget": 3,
        "budget_used": 3,
        "trials": [
            trial(0, [0], "00:00", "01:40"),
            trial(1, [1], "00:00", "01:00", state="FAIL", reason="stale"),
            trial(2, [0], "01:40", "03:20", retry_of=1),
            trial(3, [0, 1], "03:20", "05:00"),
        ],
    }
    s = summarize(dump, tmp_path)
    assert s["gpu_time_s"] == {"0": 300.0, "1": 160.0}
    assert s["gpu_overlaps"] == []
    assert s["by_tensor_parallel_size"] == {"1": {"COMPLETE": 2, "FAIL": 1}, "2": {"COMPLETE": 1}}
    assert s["retries"] == [{"trial": 2, "retry_of": 1}] and s["killed"].startswith("1796085543")
    assert (s["wall_s"], s["one_worker_s"]) == (300.0, 360.0)
    # a TP=2 trial that started while a TP=1 trial held GPU 1 is caught
    dump["trials"].append(trial(4, [0, 1], "00:30", "00:50"))
    assert {tuple(o["trials"]) for o in summarize(dump, tmp_path)["gpu_overlaps"]} == {(0, 4), (1, 4)}
