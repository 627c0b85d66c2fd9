"""A fleet of N workers on one study and one PostgreSQL, simulated on one machine (issue 42).

Every simulated worker runs the REAL worker loop (``worker.stage_loop.run_stages``: recovery of stale and
orphaned trials, ask within the budget under the budget lock, the first heartbeat, the heartbeat
thread, the trial's attribute writes and level rows, tell, the dashboard notes through
``report.dashboard.publish.after_trial``, the wait at the end), each with its own storage (its own engine,
its own connections), exactly as one ``nova-search worker`` process holds them. Only the trial's
engine and measurement are replaced: a stand-in that draws the configuration as the real trial does
(``trial.run.choose_config``), writes what a real trial writes (config, worker, argv, deploy argv,
server log, engine version, per level: the level row and the levels attribute; timing, summary),
sleeps ``--trial-s`` seconds in all, and returns objective values computed from the configuration.

How it maps to real workers: ``--procs`` processes (default 10), each running N / procs worker loops
in threads. A thread stands for one worker process (one GPU group); what differs is that the threads
of one process share its Python interpreter (the GIL: client-side CPU is slower than on a fleet of
hosts, which makes the latencies measured here an upper bound) and its orphan bookkeeping. Killing
one process kills N / procs workers at once, mid-trial: with 10 processes, killing one is 10 % of
the fleet. Time is compressed: a real trial takes minutes, the stand-in ``--trial-s`` seconds, and
heartbeats run every ``--heartbeat-s`` (default 5 s, grace 3x) instead of 30 s, so the database
sees more calls per second than a real fleet of the same size.

    .venv/bin/python -m benchmarks.fleet_scale --workers 200 [--budget 400] [--trial-s 20]
        [--max-connections 100] [--kill-frac 0.1] [--json out.json]

Each run starts a throwaway PostgreSQL server (``nova_search/testing/pg_server.py``) with
``--max-connections`` and measures: p50/p99 latency of ask (budget lock included), the budget lock
alone, tell and heartbeat; connections held at peak (``pg_stat_activity``, sampled every 0.2 s); the
server's CPU (``/proc``) and transactions per second (``pg_stat_database``); the budget overshoot; duplicate
configurations among the trials counted toward the budget; trials lost (counted toward the budget
but not COMPLETE at the end) after a tenth of the workers are killed mid-trial; workers hung at the
deadline. Prints a JSON line; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

#: the study the fleet runs
STUDY = "fleet"
#: the repository the workers import nova-search from (this file's, so that a copy of older code runs its own)
REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- the spec


def fleet_spec_dict(budget: int) -> dict[str, Any]:
    """The stand-in spec with a space of 4096 configurations and a sweep of four levels."""
    from nova_search.testing.specs import fake_spec_dict

    return fake_spec_dict(
        budget,
        space={
            "max_num_seqs": {"low": 1, "high": 256, "log": True},
            "enable_prefix_caching": {"choices": [True, False]},
            "enable_chunked_prefill": {"choices": [True, False]},
            "max_num_batched_tokens": {"choices": [2048, 4096, 8192, 16384]},
        },
        sweep={"concurrency": [1, 4, 16, 64], "warmup_requests": 1, "requests": 8},
    )


# ----------------------------------------------------------------------------- one process of workers

_samples: dict[str, list[float]] = defaultdict(list)
_samples_guard = threading.Lock()


def _note(kind: str, seconds: float) -> None:
    with _samples_guard:
        _samples[kind].append(round(seconds * 1000, 3))


def _timed(kind: str, fn: Any) -> Any:
    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            _note(kind, time.perf_counter() - t0)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def _stand_in_trial(trial_s: float) -> Any:
    """``trial.run.run_trial`` with the engine and the measurement replaced (see the docstring)."""
    from nova_search import schema
    from nova_search.db import retrying
    from nova_search.measure.metrics import LevelResult
    from nova_search.measure.objectives import objective_values
    from nova_search.trial.run import choose_config
    from nova_search.trial.window import write_attr

    def run_trial(trial: Any, ctx: Any) -> list[float]:
        retry_s = ctx.storage_retry_s
        config = retrying(
            lambda: choose_config(trial, ctx.spec, ctx.stage, ctx.base_config), retry_s, "sample a trial in"
        )
        knobs = config.as_dict()

        def put(attr: Any, value: Any) -> None:
            write_attr(trial, attr, value, retry_s)

        put(schema.CONFIG, config)
        gpus = tuple(ctx.slot.gpus)
        put(schema.WORKER, schema.WorkerTag(ctx.worker, gpus, os.getpid()))
        argv = (
            "vllm",
            "serve",
            "fake-model",
            *(f"--{k}={v}" for k, v in sorted(knobs.items()) if v is not None),
        )
        put(schema.ARGV, argv)
        put(schema.DEPLOY_ARGV, argv)
        put(schema.SERVER_LOG, f"/tmp/fleet/trial-{trial.number:04d}/server.log")
        levels_at = list(ctx.spec.sweep.concurrency)
        step = trial_s / (len(levels_at) + 1)
        if ctx.cancel.wait(step):  # the boot
            raise KeyboardInterrupt
        put(schema.ENGINE_VERSION, "stand-in")
        seqs = float(knobs.get("max_num_seqs") or 64)
        tokens = float(knobs.get("max_num_batched_tokens") or 8192)
        gain = (1.15 if knobs.get("enable_prefix_caching") else 1.0) * (
            1.05 if knobs.get("enable_chunked_prefill") else 1.0
        )
        levels: list[LevelResult] = []
        for c in levels_at:
            if ctx.cancel.wait(step):
                raise KeyboardInterrupt
            served = min(c, seqs)
            tok_s = gain * 40 * served / (1 + served / 48) * (1 + (tokens / 16384) * 0.1)
            ttft = 20 + 2 * c * (1 + c / max(seqs, 1)) * 8192 / tokens
            level = LevelResult(
                concurrency=c,
                requests=8,
                completed=8,
                errors=0,
                error_rate=0.0,
                duration_s=step,
                input_tokens=128,
                output_tokens=128,
                output_throughput=tok_s,
                total_token_throughput=2 * tok_s,
                request_throughput=tok_s / 16,
                ttft_mean_ms=ttft / 2,
                ttft_p99_ms=ttft,
                tpot_mean_ms=10.0 + c,
                tpot_p99_ms=20.0 + c,
                itl_mean_ms=9.0 + c,
                itl_p99_ms=30.0 + c,
                e2e_mean_ms=500.0 + c,
                e2e_p99_ms=900.0 + c,
            )
            ctx.sink.record(
                trial=trial,
                level=level,
                engine_metrics={"vllm:num_requests_running": float(c)},
                argv=list(argv),
                engine_version="stand-in",
                gpus=gpus,
            )
            levels.append(level)
            put(schema.LEVELS, tuple(levels))
        put(schema.TIMING, {"boot_s": step, "windows_s": step * len(levels_at)})
        values = objective_values(levels, ctx.spec.objectives)
        put(schema.SUMMARY, ", ".join(f"{v:.4g}" for v in values if v is not None))
        return [float(v) for v in values]  # type: ignore[arg-type]

    return run_trial


class _Retries(logging.Handler):
    """Counts the one-per-outage warnings of ``db.retrying`` by what was being done."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "retrying for up to" in message:
            self.counts[message.split(" (")[0][:80]] += 1
        else:  # any other warning, kept whole (the first 20 kinds): a failed run says what went wrong
            key = "other: " + message[:200]
            if key in self.counts or sum(k.startswith("other: ") for k in self.counts) < 20:
                self.counts[key] += 1


def child(args: argparse.Namespace) -> None:
    """One process running ``--threads`` worker loops; writes its samples to ``--out`` at the end."""
    import optuna

    import nova_search.worker.ask as ask
    import nova_search.worker.loop as loop
    import nova_search.worker.stage_loop as stage_loop
    from nova_search.db import StorageLock
    from nova_search.report.dashboard.publish import after_stage, after_trial

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    retries = _Retries()
    logging.getLogger("nova_search").addHandler(retries)
    logging.getLogger("nova_search").setLevel(logging.WARNING)

    loop.run_trial = _stand_in_trial(args.trial_s)
    ask._ask_locked = _timed("ask", ask._ask_locked)
    loop.tell_outcome = _timed("tell", loop.tell_outcome)
    loop.fail_stale = _timed("recover", loop.fail_stale)
    StorageLock.__enter__ = _timed("lock", StorageLock.__enter__)  # type: ignore[method-assign]
    optuna.storages.RDBStorage.record_heartbeat = _timed(  # type: ignore[method-assign]
        "heartbeat", optuna.storages.RDBStorage.record_heartbeat
    )
    from nova_search.db import LevelStore

    LevelStore.record = _timed("level_row", LevelStore.record)  # type: ignore[method-assign]
    notes = _timed("notes", after_trial)
    stage_notes = _timed("stage_notes", after_stage)
    outcomes: list[dict[str, Any]] = []
    guard = threading.Lock()

    def one(index: int) -> None:
        t0 = time.monotonic()
        try:
            _last, ran = stage_loop.run_stages(
                STUDY,
                args.url,
                loop.WorkerOptions(
                    artifacts_dir=args.artifacts,
                    on_trial_done=None if args.no_notes else notes,
                    on_stage_done=None if args.no_notes else stage_notes,
                ),
            )
            outcome: dict[str, Any] = {"ok": True, "ran": ran}
        except BaseException as e:  # noqa: BLE001 - the outcome is the measurement
            outcome = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        outcome["wall_s"] = round(time.monotonic() - t0, 2)
        with guard:
            outcomes.append(outcome)

    def flush() -> None:  # also while running: a process killed or hung at the deadline still counts
        with _samples_guard, guard:
            data = {"samples": dict(_samples), "outcomes": list(outcomes), "retries": dict(retries.counts)}
        tmp = Path(args.out + ".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(args.out)

    threads = [threading.Thread(target=one, args=(i,), name=f"worker-{i}") for i in range(args.threads)]
    for t in threads:
        t.start()
        time.sleep(args.stagger_s)
    while any(t.is_alive() for t in threads):
        threads[0].join(timeout=5)
        flush()
    for t in threads:
        t.join()
    flush()


# ----------------------------------------------------------------------------- the fleet


class _Monitor(threading.Thread):
    """Samples connections (pg_stat_activity) every 0.2 s on one superuser connection of its own."""

    def __init__(self, libpq: str, dbname: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(libpq, autocommit=True, connect_timeout=10)
        self.dbname = dbname
        self.stop = threading.Event()
        self.peak = 0
        self.peak_all = 0
        self.series: list[int] = []

    def xacts(self) -> int:
        row = self.conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (self.dbname,)
        ).fetchone()
        return int(row[0]) if row else 0

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                n, n_all = self.conn.execute(
                    "SELECT count(*) FILTER (WHERE datname = %s), count(*) FILTER (WHERE backend_type = "
                    "'client backend') FROM pg_stat_activity",
                    (self.dbname,),
                ).fetchone()
            except Exception:  # noqa: BLE001 - a missed sample
                continue
            self.series.append(int(n))
            self.peak = max(self.peak, int(n))
            self.peak_all = max(self.peak_all, int(n_all) - 1)  # less the monitor's own


def _pool_policy() -> str:
    """Which connection policy the code under test has (its nova_search.db.connections)."""
    try:
        from nova_search.db import connections
    except ImportError:
        return "none (Optuna's QueuePool 5 + 10 per engine)"
    from nova_search.db import budget

    lock = f"; lock queue {budget.LOCK_QUEUE}, retries up to {budget.LOCK_MAX_WAIT_S:g} s"
    size = connections.pool_size()
    if size == 0:
        return "NullPool (a connection per transaction)" + lock
    return f"pool {size}+0, idle closed after {connections.IDLE_CLOSE_S} s" + lock


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def fleet(args: argparse.Namespace) -> dict[str, Any]:
    import optuna
    from optuna.trial import TrialState

    from nova_search import schema
    from nova_search.db import count_toward_budget, open_storage, retrying
    from nova_search.search import lifecycle as nova_study
    from nova_search.spec import parse_spec
    from nova_search.testing.pg_server import pgbouncer, throwaway_server

    budget = args.budget or 2 * args.workers
    procs_n = min(args.procs, args.workers)
    per = [args.workers // procs_n + (1 if i < args.workers % procs_n else 0) for i in range(procs_n)]
    result: dict[str, Any] = {
        "workers": args.workers,
        "procs": procs_n,
        "budget": budget,
        "trial_s": args.trial_s,
        "heartbeat_s": args.heartbeat_s,
        "max_connections": args.max_connections,
        "code": args.label,
        "db_pool": _pool_policy(),
        "loadavg_before": os.getloadavg(),
    }
    with contextlib.ExitStack() as stack:
        pg = stack.enter_context(throwaway_server(max_connections=args.max_connections))
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url = pg.create_database("fleet")
        # the workers' URL: the server, or PgBouncer in transaction mode in front of it (--pgbouncer N);
        # the harness reads and watches the server itself
        workers_url = stack.enter_context(pgbouncer(pg, args.pgbouncer)) if args.pgbouncer else url
        result["pgbouncer_pool"] = args.pgbouncer
        nova_study.create(parse_spec(fleet_spec_dict(budget)), url, STUDY)
        # the harness's own reads: one storage, no idle connection (``optuna.load_study(url)`` would
        # build an engine with a pool of its own on every look, each holding a connection until
        # collected: on a loaded machine they filled the server before the workers did)
        reader = open_storage(url, read_only=True)
        monitor = _Monitor(pg.libpq("postgres"), "fleet")  # not in the fleet database: its counts stay clean
        monitor.start()
        env = {
            **os.environ,
            "NOVA_HEARTBEAT_INTERVAL": str(args.heartbeat_s),
            "NOVA_GRACE_PERIOD": str(3 * args.heartbeat_s),
            "NOVA_STORAGE_RETRY_S": str(args.retry_s),
            "PYTHONPATH": str(REPO),
        }
        cpu0, xact0, t0 = pg.cpu_s(), monitor.xacts(), time.monotonic()
        children = []
        for i, n in enumerate(per):
            out = Path(tmp) / f"child-{i}.json"
            argv = [
                sys.executable,
                "-m",
                "benchmarks.fleet_scale",
                "child",
                "--url",
                workers_url,
                "--threads",
                str(n),
                "--trial-s",
                str(args.trial_s),
                "--stagger-s",
                str(args.stagger_s),
                "--artifacts",
                str(Path(tmp) / "artifacts"),
                "--out",
                str(out),
            ] + (["--no-notes"] if args.no_notes else [])
            log = open(Path(tmp) / f"child-{i}.log", "w")  # noqa: SIM115 - closed below
            children.append(
                (subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT), out, log, n)
            )
        killed: list[int] = []
        n_kill = round(args.kill_frac * procs_n)
        deadline = t0 + args.timeout_s
        progress: list[tuple[float, int]] = []  # (s since start, trials COMPLETE) every 15 s
        next_look = t0 + 15
        while time.monotonic() < deadline and any(p.poll() is None for p, *_ in children):
            if time.monotonic() >= next_look:
                next_look += 15
                try:
                    done = optuna.load_study(study_name=STUDY, storage=reader).get_trials(
                        deepcopy=False, states=(TrialState.COMPLETE,)
                    )
                    progress.append((round(time.monotonic() - t0), len(done)))
                except Exception:  # noqa: BLE001 - a missed look
                    pass
            if n_kill and not killed:
                try:
                    trials = optuna.load_study(study_name=STUDY, storage=reader).get_trials(deepcopy=False)
                except Exception:  # noqa: BLE001 - the database may be full: look again
                    trials = []
                used = count_toward_budget(trials)
                mine = {p.pid for p, *_ in children[:n_kill]}
                running_there = [
                    t
                    for t in trials
                    if t.state == TrialState.RUNNING
                    and (tag := schema.WORKER.read(t.user_attrs)) is not None
                    and tag.pid in mine
                ]
                if used >= args.kill_at * budget and running_there:
                    for p, *_ in children[:n_kill]:
                        p.send_signal(signal.SIGKILL)
                        killed.append(p.pid)
                    result["killed_at_s"] = round(time.monotonic() - t0, 1)
                    result["killed_running_trials"] = len(running_there)
            time.sleep(0.5)
        wall = time.monotonic() - t0
        hung = [p.pid for p, *_ in children if p.poll() is None]
        for p, *_ in children:
            if p.poll() is None:
                p.kill()
                p.wait()
        cpu1, xact1 = pg.cpu_s(), monitor.xacts()
        monitor.stop.set()
        monitor.join()
        samples: dict[str, list[float]] = defaultdict(list)
        outcomes: list[dict[str, Any]] = []
        retries: Counter[str] = Counter()
        for _p, out, log, _n in children:
            log.close()
            if out.exists():
                data = json.loads(out.read_text())
                for k, v in data["samples"].items():
                    samples[k] += v
                outcomes += data["outcomes"]
                retries.update(data["retries"])
        logs = "".join((Path(tmp) / f"child-{i}.log").read_text(errors="replace") for i in range(procs_n))
        study_id = reader.get_study_id_from_name(STUDY)
        trials, study_attrs = retrying(
            lambda: (
                optuna.load_study(study_name=STUDY, storage=reader).get_trials(deepcopy=False),
                reader.get_study_system_attrs(study_id),
            ),
            30.0,
            "read the fleet's trials",
            url=url,
        )
        reader.engine.dispose()
    if not args.no_notes:  # optuna-dashboard's note version keys: per trial id, and the study's
        result["notes_missing"] = sum(
            1
            for t in trials
            if t.state.is_finished() and f"dashboard:{t._trial_id}:note_ver" not in study_attrs
        )
        result["study_note"] = "dashboard:note_ver" in study_attrs
    counted = count_toward_budget(trials)
    retried = {t.system_attrs.get(schema.RETRY_OF) for t in trials} - {None}
    toward = [
        t
        for t in trials
        if t.state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state == TrialState.FAIL and t.number not in retried)
    ]
    # a retry re-runs its failed trial's configuration on purpose: each chain counts once
    by_config: dict[str, list[Any]] = defaultdict(list)
    for t in toward:
        by_config[json.dumps(t.params, sort_keys=True)].append(t)
    states = Counter(t.state.name for t in trials)
    result.update(
        {
            "wall_s": round(wall, 1),
            "complete_over_time": progress,
            "loadavg_after": os.getloadavg(),
            "finished": not hung,
            "hung_processes": len(hung),
            "killed_workers": sum(n for p, _, _, n in children if p.pid in killed),
            "states": dict(states),
            "counted_toward_budget": counted,
            "budget_overshoot": max(0, counted - budget),
            "complete": states.get("COMPLETE", 0),
            "lost": sum(1 for t in toward if t.state != TrialState.COMPLETE),
            "duplicates": sum(len(ts) - 1 for ts in by_config.values()),
            # each repeated configuration's trials: number, state, the trial it re-runs, when it started
            "duplicated": [
                [
                    (t.number, t.state.name, t.system_attrs.get(schema.RETRY_OF), str(t.datetime_start))
                    for t in ts
                ]
                for ts in by_config.values()
                if len(ts) > 1
            ],
            "peak_connections": monitor.peak,
            "peak_client_connections_server": monitor.peak_all,
            "pg_cpu_s": round(cpu1 - cpu0, 2),
            "pg_cpu_pct_of_one_core": round(100 * (cpu1 - cpu0) / wall, 1),
            "xacts": xact1 - xact0,
            "tps": round((xact1 - xact0) / wall, 1),
            "workers_ok": sum(1 for o in outcomes if o.get("ok")),
            "worker_errors": dict(Counter(o["error"][:160] for o in outcomes if not o.get("ok"))),
            "retry_warnings": dict(retries),
            "too_many_clients_in_logs": logs.count("too many clients"),
            "latency_ms": {
                k: {
                    "n": len(v),
                    "p50": _pct(v, 0.5),
                    "p99": _pct(v, 0.99),
                    "max": _pct(v, 1.0),
                    "mean": round(statistics.fmean(v), 1),
                }
                for k, v in sorted(samples.items())
            },
        }
    )
    return result


def parser() -> argparse.ArgumentParser:
    """The options of a fleet run (``fleet(parser().parse_args([...]))`` from a test)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--procs", type=int, default=10, help="processes the workers are spread over")
    ap.add_argument("--budget", type=int, default=0, help="trials (default: 2 per worker)")
    ap.add_argument("--trial-s", type=float, default=20.0, help="the stand-in trial's length")
    ap.add_argument("--heartbeat-s", type=int, default=5, help="NOVA_HEARTBEAT_INTERVAL (grace: 3x)")
    ap.add_argument(
        "--stagger-s", type=float, default=0.05, help="between the starts of one process's workers"
    )
    ap.add_argument("--max-connections", type=int, default=100)
    ap.add_argument("--kill-frac", type=float, default=0.1, help="share of the processes SIGKILLed mid-trial")
    ap.add_argument("--kill-at", type=float, default=0.3, help="when that share of the budget is counted")
    ap.add_argument("--retry-s", type=float, default=300.0, help="NOVA_STORAGE_RETRY_S")
    ap.add_argument("--timeout-s", type=float, default=420.0, help="workers still running then are hung")
    ap.add_argument("--no-notes", action="store_true", help="no dashboard notes (on_trial_done)")
    ap.add_argument(
        "--pgbouncer",
        type=int,
        default=0,
        metavar="POOL",
        help="the workers connect through PgBouncer (transaction mode, POOL server connections); 0: direct",
    )
    ap.add_argument("--label", default="", help="which code this is (before/after), for the JSON")
    ap.add_argument("--json", help="append the result as a JSON line to this file")
    return ap


def _notes(r: dict[str, Any]) -> str:
    if "notes_missing" not in r:
        return "off"
    v = r["latency_ms"].get("notes")
    spent = f"{v['p50']:.0f} / {v['p99']:.0f}" if v else "-"
    return f"{spent} ({r['notes_missing']})"


def table(path: str) -> str:
    """The Markdown table of the runs in a JSON-lines file (``python -m benchmarks.fleet_scale table F``)."""
    runs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    runs.sort(key=lambda r: (r["workers"], r["code"] != "before"))
    head = (
        "| N | code | ask p50/p99 ms | lock p50/p99 ms | tell p50/p99 ms | heartbeat p50/p99 ms "
        "| peak conns | PG CPU % of a core | xact/s | overshoot | duplicates | lost (killed) | done/hung "
        "| workers exited with an error | notes p50/p99 ms (trials without a note) | load avg |"
    )
    rows = [head, "|" + "---|" * 16]

    def lat(r: dict[str, Any], k: str) -> str:
        v = r["latency_ms"].get(k)
        return f"{v['p50']:.0f} / {v['p99']:.0f}" if v else "-"

    for r in runs:
        errors = "; ".join(f"{n}x {e[:70]}" for e, n in r["worker_errors"].items())
        n_err = sum(r["worker_errors"].values())
        rows.append(
            f"| {r['workers']} | {r['code']} | {lat(r, 'ask')} | {lat(r, 'lock')} | {lat(r, 'tell')} "
            f"| {lat(r, 'heartbeat')} | {r['peak_connections']} | {r['pg_cpu_pct_of_one_core']} "
            f"| {r['tps']} | {r['budget_overshoot']} | {r['duplicates']} "
            f"| {r['lost']} ({r['killed_workers']} workers) "
            f"| {r['complete']}/{r['budget']} in {r['wall_s']:.0f} s, {r['hung_processes']} hung "
            f"| {n_err}{': ' + errors if errors else ''} "
            f"| {_notes(r)} "
            f"| {r['loadavg_before'][0]:.1f} -> {r['loadavg_after'][0]:.1f} |"
        )
    return "\n".join(rows)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "table":
        print(table(sys.argv[2]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        ap = argparse.ArgumentParser()
        ap.add_argument("child")
        ap.add_argument("--url", required=True)
        ap.add_argument("--threads", type=int, required=True)
        ap.add_argument("--trial-s", type=float, required=True)
        ap.add_argument("--stagger-s", type=float, default=0.0)
        ap.add_argument("--artifacts", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--no-notes", action="store_true")
        child(ap.parse_args())
        return
    args = parser().parse_args()
    result = fleet(args)
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
