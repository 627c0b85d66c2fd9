"""What the dashboard update costs a worker after each trial (``report.dashboard.publish.after_trial``): one
read of the whole study (``results.load.results_of``), the trial's note, the study note and the graphs, as
the study grows. Without an engine: trials are written to storage the way a worker writes them (four
levels each, config, argv, a note per trial already saved), then the update for the last one is timed.

    .venv/bin/python -m benchmarks.dashboard_refresh [--sizes 10 100 500] [--repeat 3] [--postgres]

SQLite in a temporary folder by default; --postgres uses NOVA_TEST_PG (default
postgresql+psycopg://postgres@127.0.0.1:5432/test) in a throwaway database. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import warnings

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from nova_search import schema
from nova_search.knobs import EngineConfig
from nova_search.measure.metrics import LevelResult
from nova_search.report.dashboard.notes import study_note_markdown, trial_note_markdown
from nova_search.report.dashboard.publish import after_trial, refresh_dashboard, write_trial_note
from nova_search.results.decode import study_results

LEVELS = (1, 8, 32, 64)


def level(c: int, tok_s: float) -> LevelResult:
    ms = 100.0 + c
    return LevelResult(
        concurrency=c, requests=200, completed=200, errors=0, error_rate=0.0, duration_s=20.0,
        input_tokens=51_200, output_tokens=int(tok_s * 20), output_throughput=tok_s,
        total_token_throughput=tok_s * 2, request_throughput=10.0, goodput=9.0, goodput_rate=0.9,
        ttft_mean_ms=ms, ttft_p50_ms=ms, ttft_p90_ms=ms * 1.5, ttft_p99_ms=ms * 2,
        tpot_mean_ms=10.0, tpot_p50_ms=10.0, tpot_p90_ms=12.0, tpot_p99_ms=15.0,
        itl_mean_ms=10.0, itl_p50_ms=9.0, itl_p90_ms=14.0, itl_p99_ms=20.0,
        e2e_mean_ms=3000.0, e2e_p50_ms=2900.0, e2e_p90_ms=3500.0, e2e_p99_ms=4000.0,
        kv_cache_usage_peak=0.4, kv_cache_usage_mean=0.2, num_running_mean=float(c),
        num_waiting_mean=0.0, num_waiting_max=0.0, preemptions=0.0,
    )  # fmt: skip


def populate(url: str, n: int) -> optuna.Study:
    study = optuna.create_study(storage=url, directions=["maximize", "minimize"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.set_metric_names(["output_throughput@best", "ttft_p99_ms@32"])
    dists = {
        "max_num_seqs": IntDistribution(1, 256, log=True),
        "prefix": CategoricalDistribution([True, False]),
    }
    for i in range(n):
        tok = 1000.0 + 7 * (i % 97)
        t = create_trial(
            params={"max_num_seqs": 1 + i % 256, "prefix": i % 2 == 0},
            distributions=dists,
            values=[tok * 4, 164.0],
            state=TrialState.COMPLETE,
            user_attrs={
                **(schema.ROLE.item("stock") if i == 0 else {}),
                **schema.LEVELS.item(tuple(level(c, tok * (1 + j)) for j, c in enumerate(LEVELS))),
                **schema.CONFIG.item(
                    EngineConfig(max_num_seqs=1 + i % 256, enable_prefix_caching=i % 2 == 0)
                ),
                **schema.ARGV.item(
                    ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/m")
                    + ("--max-num-seqs", str(1 + i % 256), "--host", "127.0.0.1", "--port", "40000")
                ),
                **schema.SUMMARY.item(f"output_throughput@best={tok * 4:.4g}"),
            },
        )
        study.add_trial(t)
    # every trial already has its note, as in a study the worker wrote (they live in the study's
    # system attributes, which each note and graph write reads back)
    results = study_results(study, url)
    for t in study.get_trials(deepcopy=False):
        write_trial_note(study, results.trial(t.number), t._trial_id, results.objectives)
    refresh_dashboard(study, results)
    return study


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@contextlib.contextmanager
def storage(postgres: bool):
    if postgres:
        from nova_search.testing.pg import fresh_database

        with fresh_database() as url:
            yield url
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"


def measure(url: str, n: int, repeat: int) -> tuple[float, float, float, int, float]:
    """(after_trial s, study read s, markdown s, study system attributes, their MB), medians."""
    study = populate(url, n)
    last = study.get_trials(deepcopy=False)[-1]
    total = statistics.median(timed(lambda: after_trial(study, last)) for _ in range(repeat))
    read = statistics.median(timed(lambda: study_results(study, url)) for _ in range(repeat))
    results = study_results(study, url)
    md = statistics.median(
        timed(lambda: (study_note_markdown(results), trial_note_markdown(results.trials[-1])))
        for _ in range(repeat)
    )
    attrs = study._storage.get_study_system_attrs(study._study_id)
    return total, read, md, len(attrs), sum(len(str(v)) for v in attrs.values()) / 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--postgres", action="store_true")
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    head = ("trials", "after_trial s", "read s", "markdown s", "study attrs", "MB")
    print(" ".join(f"{h:>13}" for h in head))
    for n in args.sizes:
        with storage(args.postgres) as url:
            total, read, md, attrs, size = measure(url, n, args.repeat)
        print(f"{n:>13} {total:>13.3f} {read:>13.3f} {md:>13.4f} {attrs:>13} {size:>13.2f}")


if __name__ == "__main__":
    main()
