"""Storage overhead of nova's worker loop, without an engine: trials per second and tell latency with
1, 4 and 8 worker processes, on PostgreSQL and on SQLite. Each trial does what a real one does to
storage: the budget-locked ask, the attribute writes of a two-level trial (config, argv, worker,
levels twice, timing, summary), a constraint, one nova_level_result row per level, and the tell.

    .venv/bin/python -m benchmarks.storage_overhead [--trials-per-worker 25]

PostgreSQL: NOVA_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test); a throwaway
database is created and dropped. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time

import optuna

from nova_search import schema
from nova_search.db import LevelStore, StorageLock, rdb_storage
from nova_search.knobs import EngineConfig
from nova_search.measure.metrics import LevelResult
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import minimal_spec_dict
from nova_search.worker.ask import ask_within_budget

LEVEL = LevelResult(
    concurrency=1,
    requests=8,
    completed=8,
    errors=0,
    error_rate=0.0,
    duration_s=1.0,
    input_tokens=800,
    output_tokens=400,
    output_throughput=400.0,
    total_token_throughput=1200.0,
    request_throughput=8.0,
    ttft_p99_ms=50.0,
)


def _worker(url: str, name: str, out: mp.Queue) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study, spec = nova_study.load(name, url)
    storage = rdb_storage(study)
    lock = StorageLock(storage.engine, name)
    store = LevelStore(url)
    tells: list[float] = []
    n = 0
    while True:
        trial = ask_within_budget(study, lock, spec.budget.n_trials)
        if trial is None:
            break
        schema.CONFIG.write(trial, EngineConfig(max_num_seqs=8))
        schema.ARGV.write(trial, ("python", "-m", "vllm", "--max-num-seqs", "8"))
        schema.WORKER.write(trial, schema.WorkerTag("bench"))
        for c in (1, 4):
            store.record(
                trial_id=trial._trial_id,
                study_name=name,
                trial_number=trial.number,
                level=LEVEL,
                engine_metrics={},
                worker_host="bench",
                gpu_ids=(),
                gpu_name=None,
                engine_version="x",
                argv=["python"],
            )
            schema.LEVELS.write(trial, (LEVEL,) * (1 if c == 1 else 2))
        schema.TIMING.write(trial, {"boot_s": 1.0})
        trial.set_constraint("ttft", -1.0)
        schema.SUMMARY.write(trial, "x")
        t0 = time.perf_counter()
        study.tell(trial, [400.0])
        tells.append(time.perf_counter() - t0)
        n += 1
    store.close()
    out.put((n, tells))


def measure(url: str, workers: int, per_worker: int) -> tuple[float, float, float, int]:
    name = f"bench{workers}"
    nova_study.create(
        parse_spec(minimal_spec_dict(budget={"n_trials": workers * per_worker}, baselines=[])), url, name
    )
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_worker, args=(url, name, q)) for _ in range(workers)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    total = sum(n for n, _ in results)
    tells = sorted(t for _, ts in results for t in ts)
    return total / wall, statistics.median(tells) * 1000, tells[int(0.95 * (len(tells) - 1))] * 1000, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials-per-worker", type=int, default=25)
    args = ap.parse_args()
    print(
        f"{'storage':<10} {'workers':>7} {'trials':>6} {'trials/s':>9} "
        f"{'tell p50 ms':>12} {'tell p95 ms':>12}"
    )
    with fresh_database() as pg_url:
        for backend in ("postgres", "sqlite"):
            for workers in (1, 4, 8):
                if backend == "postgres":
                    url = pg_url
                else:
                    url = f"sqlite:///{tempfile.mkdtemp(prefix='nova-bench-')}/s.db"
                rate, p50, p95, total = measure(url, workers, args.trials_per_worker)
                print(
                    f"{backend:<10} {workers:>7} {total:>6} {rate:>9.1f} {p50:>12.1f} {p95:>12.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
