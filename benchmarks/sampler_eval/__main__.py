"""The sampler's evaluation set, in one command (issue 55).

    .venv/bin/python -m benchmarks.sampler_eval run [--split held-out] [--seeds 40] [--jobs 2]
    .venv/bin/python -m benchmarks.sampler_replay eval          # the same command

replays nova's sampler and the baselines on every table of the split and writes
``benchmarks/results/sampler-eval/results.json`` and ``table.md`` (one row a table: random's,
random-without-repeats', Optuna's default TPE's and nova's median trials to within 5 % of the best,
the spread over seeds, nova over random, and whether it meets half of random's or why not; then the
same samplers' trials to within 10 %). ``run --grid SPEC TABLE --out DIR`` does the same on measured
grids that are not in the set (``benchmarks/sampler_replay.py measure`` wrote them: each level, each
objective its rows hold), the figure checked on tables nova was never tuned on.
``tune`` replays variants of nova's sampler on the training split only (few seeds) and prints one
line each; ``split`` prints the committed split, or draws it (``--write``: once, before any tuning;
it is committed in ``split.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import optuna

from benchmarks.sampler_eval.baselines import reference
from benchmarks.sampler_eval.replay import replay, summarize
from benchmarks.sampler_eval.samplers import registry, variant
from benchmarks.sampler_eval.synthetic import generate
from benchmarks.sampler_eval.tables import RESULTS, Table, cpu_grid_tables, measured_grid_tables, study_tables
from nova_search.search.sampler import TpeSettings

HERE = Path(__file__).resolve().parent
SPLIT = HERE / "split.json"
OUT = RESULTS / "sampler-eval"
#: synthetic tables: seeds 0 to SYNTHETIC - 1
SYNTHETIC = 48
#: the share of random's median trials nova must reach (the issue's goal)
GOAL = 0.5
#: nova's start: the trials it draws before its model has any (TPE's ``n_startup_trials``)
START = TpeSettings().n_startup_trials
#: the replayed samplers besides nova (random search's figures are exact: ``baselines``)
REPLAYED = ("nova_before", "optuna_default")


def all_tables() -> list[Table]:
    return [*cpu_grid_tables(), *study_tables(), *(generate(s) for s in range(SYNTHETIC))]


def draw_split(tables: list[Table]) -> dict[str, list[str]]:
    """Half of each family's sources held out, by a seeded draw: the CPU grid's objectives (its
    throughput stays in training: the sampler was tuned on it before, so it cannot be held out), the
    recorded studies of a whole space (joint), those of drafters alone (speculative), the synthetic
    surfaces."""
    rng = random.Random("nova-sampler-eval-split")
    out: dict[str, list[str]] = {"train": [], "held_out": []}
    families: dict[str, list[str]] = {}
    for t in tables:
        family = t.source.split("/")[0] + (f"-{t.stage}" if t.kind == "partial" else "")
        if t.source not in families.setdefault(family, []):
            families[family].append(t.source)
    for sources in families.values():
        pool = [s for s in sources if s != "cpu-grid/output_throughput@32"]
        rng.shuffle(pool)
        held = sorted(pool[: len(sources) // 2])
        out["held_out"] += held
        out["train"] += sorted(s for s in sources if s not in held)
    return out


def read_split() -> dict[str, list[str]]:
    return json.loads(SPLIT.read_text())


def grid_tables(grids: list[tuple[Path, Path]]) -> list[Table]:
    """The tables of measured grids outside the set (``run --grid SPEC TABLE``), named after each
    table's folder (``grid:<folder>/<objective>@<level>``; the file's name where two share one)."""
    out: list[Table] = []
    names = [t.parent.name for _, t in grids]
    for spec, table in grids:
        name = (
            table.parent.name if names.count(table.parent.name) == 1 else f"{table.parent.name}-{table.stem}"
        )
        out += measured_grid_tables(f"grid:{name}", spec, table)
    return out


def pick(tables: list[Table], split: str) -> list[Table]:
    known = read_split()
    sources = {s for part in known.values() for s in part}
    unknown = sorted({t.source for t in tables} - sources)
    if unknown:
        raise SystemExit(
            f"split.json: no split for {', '.join(unknown)}; the split is drawn once (split --write)"
        )
    if split == "all":
        return tables
    keep = set(known["held_out" if split == "held-out" else "train"])
    return [t for t in tables if t.source in keep]


def _job(args: tuple[str, str, int, int, str | None]) -> tuple[str, str, list[Any]]:
    """One table and one sampler over ``seeds`` seeds (a process of the pool)."""
    warnings.simplefilter("ignore")
    table_name, sampler_name, seeds, cap, variant_text = args
    table = _TABLES[table_name]
    make = variant(variant_text) if variant_text else registry()[sampler_name]
    runs = []
    for seed in range(seeds):
        sampler, order = make(table, seed)
        runs.append(replay(table, sampler, cap, order))
    return table_name, variant_text or sampler_name, runs


_TABLES: dict[str, Table] = {}


def _load(split: str, grids: tuple[tuple[Path, Path], ...] = ()) -> list[Table]:
    tables = grid_tables(list(grids)) if grids else pick(all_tables(), split)
    _TABLES.update({t.name: t for t in tables})
    return tables


def evaluate(
    tables: list[Table], names: list[str], seeds: int, cap: int, jobs: int, variant: bool = False
) -> dict[str, dict[str, Any]]:
    """Per table, per sampler: ``replay.summarize`` over the seeds."""
    work = [(t.name, n, seeds, cap, n if variant else None) for t in tables for n in names]
    out: dict[str, dict[str, Any]] = {t.name: {} for t in tables}
    if jobs > 1:
        with ProcessPoolExecutor(jobs, initializer=_load, initargs=_CHOSEN) as pool:
            done = list(pool.map(_job, work, chunksize=1))
    else:
        done = [_job(w) for w in work]
    for table_name, name, runs in done:
        out[table_name][name] = summarize(runs, cap)
    return out


#: what the pool's processes load (``_load``'s arguments): the split, or the measured grids of ``--grid``
_CHOSEN: list[Any] = ["held-out", ()]


def _reference(table_name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    plain, no_repeat = reference(_TABLES[table_name])
    return table_name, plain.as_dict(), no_repeat.as_dict()


def references(tables: list[Table], jobs: int) -> dict[str, dict[str, Any]]:
    """Per table: random search's and random search without repeats' figures (``baselines``)."""
    names = [t.name for t in tables]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, initializer=_load, initargs=_CHOSEN) as pool:
            done = list(pool.map(_reference, names, chunksize=1))
    else:
        done = [_reference(n) for n in names]
    return {n: {"random": plain, "random_no_repeat": no_repeat} for n, plain, no_repeat in done}


def verdict(row: dict[str, Any], table: Table) -> str:
    """Whether nova needs at most half of random's median trials to within 5 %, or why not."""
    nova, rand = row["nova"]["median_5"], row["random"]["median_5"]
    if nova <= GOAL * rand:
        return "met"
    if rand <= 2:
        return f"cannot: random needs {rand:g}; half of it is one trial or fewer"
    if len(table.searched) == 1:
        return (
            f"cannot: one parameter, nothing to learn between its values; without repeats "
            f"{row['random_no_repeat']['median_5']:g} is the best an order can do"
        )
    half = GOAL * rand
    why = (
        f"missed: {row['nova_over_random']:.2f}x random; random needs {rand:g} (one draw lands within 5 % "
        f"with a chance of {100 * row['random']['chance_5']:.0f} %), half of it is {half:g} trials"
    )
    if half <= START:
        why += f", all within nova's start ({START:g} trials chosen without a figure to learn from)"
    passes = row.get("passes_5")
    if passes is not None and passes[2] == 0:
        why += (
            f"; its two passes alone share no configuration within 5 % of their best (pass 1 puts "
            f"{passes[0]} there, pass 2 {passes[1]}): which ones are within 5 % is the measurement's noise"
        )
    if resolved(row) is None:
        low, high = row["nova"]["ci_5"]
        why += (
            f"; a 95 % interval of nova's median over its seeds, {low:g} to {high:g} trials, holds half "
            "of random's: the seeds do not tell this table from met"
        )
    return why


def resolved(row: dict[str, Any]) -> bool | None:
    """Whether nova's median is at most half of random's beyond the seeds' resolution (the 95 %
    interval of its median, ``replay.summarize``'s ``ci_5``, wholly at or below half: True; wholly
    above: False), or None where the interval holds half of random's."""
    half = GOAL * row["random"]["median_5"]
    low, high = row["nova"]["ci_5"]
    if high <= half:
        return True
    if low > half:
        return False
    return None


def run(args: argparse.Namespace) -> None:
    for flag in ("seeds", "cap", "jobs"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag}: {getattr(args, flag)}; it must be at least 1")
    grids = tuple((Path(s), Path(t)) for s, t in args.grid or ())
    if grids and args.out is None:
        raise SystemExit(f"--out: where to write the table of --grid's tables ({OUT} is the whole set's)")
    out = args.out or OUT
    _CHOSEN[:] = [args.split, grids]
    started = time.monotonic()
    tables = [t for t in _load(args.split, grids) if t.name.startswith(args.only)]
    if not tables:
        raise SystemExit(f"--only {args.only!r}: no table's name starts so")
    held = set(read_split()["held_out"])
    names = ["nova", *REPLAYED, *(["gp"] if args.gp else [])]
    results = evaluate(tables, names, args.seeds, args.cap, args.jobs)
    exact = references(tables, args.jobs)
    rows = []
    for t in tables:
        split_of = "unseen" if grids else "held-out" if t.source in held else "train"
        row = {"table": t.name, "split": split_of, "kind": t.kind}
        row.update({"direction": t.direction, "note": t.note, **t.census()})
        row.update(exact[t.name])
        row.update(results[t.name])
        row["nova_over_random"] = round(row["nova"]["median_5"] / row["random"]["median_5"], 3)
        row["verdict"] = verdict(row, t)
        rows.append(row)
    elapsed = time.monotonic() - started
    report = {
        "seeds": args.seeds,
        "cap": args.cap,
        "elapsed_s": round(elapsed),
        "samplers": names,
        "splits": {s: standing([r for r in rows if r["split"] == s], names) for s in SPLITS if _has(rows, s)},
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, separators=(",", ":")) + "\n")
    (out / "table.md").write_text(markdown(report))
    print(markdown(report))
    print(f"{len(rows)} tables, {args.seeds} seeds, {elapsed:.0f} s; wrote {out}")


#: the splits a report shows, in its order: measured grids given with ``--grid``, then the set's halves
SPLITS = ("unseen", "held-out", "train")
_TITLES = {
    "unseen": "measured grids outside the set (--grid), never tuned on",
    "held-out": "held-out",
    "train": "train",
}


def _has(rows: list[dict[str, Any]], split: str) -> bool:
    return any(r["split"] == split for r in rows)


def standing(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """A split's figures: tables where nova meets the goal, those where it cannot; and for each
    replayed sampler, over the tables where random needs more than 2 trials, how many it meets and
    its median over random's as a geometric mean."""
    hard = [r for r in rows if r["random"]["median_5"] > 2]
    out: dict[str, Any] = {
        "tables": len(rows),
        "met": sum(r["verdict"] == "met" for r in rows),
        "cannot": sum(r["verdict"].startswith("cannot") for r in rows),
        "random_over_2": len(hard),
    }
    # tables whose two passes alone share a configuration within 5 % of their best, and those whose
    # passes share none (the band is the measurement's noise); tables of one pass are in neither
    for name, test in (("passes_agree", lambda n: n > 0), ("passes_disagree", lambda n: n == 0)):
        these = [r for r in rows if r.get("passes_5") is not None and test(r["passes_5"][2])]
        out[name] = {"tables": len(these), "met": sum(r["verdict"] == "met" for r in these)}
    # how far the seeds pin nova's median down: met or missed beyond its 95 % interval, or within it
    judged = [r for r in rows if not r["verdict"].startswith("cannot")]
    out["seeds_resolve"] = {
        "met": sum(r["verdict"] == "met" and resolved(r) is True for r in judged),
        "missed": sum(r["verdict"] != "met" and resolved(r) is False for r in judged),
        "within": sum(resolved(r) is None for r in judged),
    }
    for name in names:
        ratios = [r[name]["median_5"] / r["random"]["median_5"] for r in hard]
        out[name] = {
            "met_where_random_over_2": sum(x <= GOAL for x in ratios),
            "geo_over_random": round(math.exp(statistics.fmean(math.log(x) for x in ratios)), 3)
            if ratios
            else None,
        }
    return out


def _cell(s: dict[str, Any], which: str = "5") -> str:
    q = s[f"iqr_{which}"]
    return f"{s[f'median_{which}']:g} [{q[0]:g}-{q[1]:g}]"


def markdown(report: dict[str, Any]) -> str:
    gp = "gp" in report["samplers"]
    lines = [
        f"{report['seeds']} seeds a replayed sampler, at most {report['cap']} trials a seed "
        f"({report['elapsed_s']} s). Median trials to within 5 % of the best [interquartile range over "
        "seeds]; random search's are exact (geometric), without repeats simulated (4000 orders).",
    ]
    by_split = {s: [r for r in report["rows"] if r["split"] == s] for s in SPLITS}
    for split, rows in by_split.items():
        if not rows:
            continue
        st = report["splits"][split]
        lines += [
            "",
            f"## {_TITLES[split]} ({st['tables']} tables)",
            "",
            f"nova at most {GOAL:g}x random's median on {st['met']} of {st['tables']} tables; "
            f"{st['cannot']} cannot (the verdicts say why). Where random needs more than 2 trials "
            f"({st['random_over_2']} tables), each sampler's median over random's, as a geometric mean, "
            "and the tables where it is at most half: "
            + "; ".join(
                f"{n} {st[n]['geo_over_random']} ({st[n]['met_where_random_over_2']})"
                for n in report["samplers"]
            )
            + "."
            + _noise_line(st)
            + _resolution_line(st, report["seeds"]),
            "",
            "| table | configurations (runnable, within 5 %; each pass alone, both) | random "
            "| random, no repeats "
            + "| Optuna default TPE | nova before"
            + (" | nova around GP" if gp else "")
            + " | nova | nova's median, 95 % interval | within 10 %: random, nova | nova / random "
            "| verdict |",
            "|---|---|---|---|---|---|" + ("---|" if gp else "") + "---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['table']} | {r['configurations']} ({r['launchable']}, {r['within_5']}"
                + ("" if r.get("passes_5") is None else "; {}, {}, {}".format(*r["passes_5"]))
                + ") "
                f"| {_cell(r['random'])} | {_cell(r['random_no_repeat'])} | {_cell(r['optuna_default'])} "
                f"| {_cell(r['nova_before'])} "
                + (f"| {_cell(r['gp'])} " if gp else "")
                + f"| {_cell(r['nova'])} | {r['nova']['ci_5'][0]:g}-{r['nova']['ci_5'][1]:g} "
                f"| {r['random']['median_10']:g}, {_cell(r['nova'], '10')} "
                f"| {r['nova_over_random']:.2f} | {r['verdict']} |"
            )
    for split, rows in by_split.items():
        if rows:
            lines += ["", *_within_10(rows, report["samplers"], _TITLES[split])]
    return "\n".join(lines) + "\n"


def _noise_line(st: dict[str, Any]) -> str:
    """Where the split's tables keep two passes: how nova does where the passes agree on the 5 % band
    and where they share no configuration of it."""
    agree, disagree = st.get("passes_agree"), st.get("passes_disagree")
    if not agree or not disagree or not agree["tables"] + disagree["tables"]:
        return ""
    return (
        f" Of the tables that keep two passes, {disagree['tables']} have passes that alone share no "
        f"configuration within 5 % of their best (which ones are within 5 % is the measurement's noise): "
        f"nova at most half of random's on {disagree['met']} of them; on the {agree['tables']} whose "
        f"passes share one or more, on {agree['met']}."
    )


def _resolution_line(st: dict[str, Any], seeds: int) -> str:
    """How many of the split's verdicts (met or missed) hold beyond the seeds' resolution."""
    r = st["seeds_resolve"]
    return (
        f" Over {seeds} seeds, a 95 % interval of nova's median lies wholly at or below half of random's "
        f"on {r['met']} tables and wholly above it on {r['missed']}; on {r['within']} it holds half of "
        "random's: more seeds would tell which side of half those tables are on."
    )


def _within_10(rows: list[dict[str, Any]], samplers: list[str], title: str) -> list[str]:
    """A split's trials to within 10 % of the best, every sampler, [interquartile range over seeds]."""
    replayed = [n for n in ("optuna_default", "nova_before", "gp") if n in samplers]  # as the 5 % table
    header = {"optuna_default": "Optuna default TPE", "nova_before": "nova before", "gp": "nova around GP"}
    lines = [
        f"### {title}: median trials to within 10 % of the best",
        "",
        "| table | configurations within 10 % | random | random, no repeats | "
        + " | ".join(header.get(n, n) for n in replayed)
        + " | nova |",
        "|---|---|---|---|" + "---|" * len(replayed) + "---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['table']} | {r['within_10']} | {_cell(r['random'], '10')} "
            f"| {_cell(r['random_no_repeat'], '10')} | "
            + " | ".join(_cell(r[n], "10") for n in replayed)
            + f" | {_cell(r['nova'], '10')} |"
        )
    return lines


def tune(args: argparse.Namespace) -> None:
    """Variants of nova's sampler on the training split: per variant, the geometric mean over the
    tables of its median trials over random's, and the tables where it is at most half of random's."""
    _CHOSEN[:] = ["train", ()]
    tables = _load("train")
    names = args.variant
    base = references(tables, args.jobs)
    results = evaluate(tables, names, args.seeds, args.cap, args.jobs, variant=True)
    # where random needs more than 2 trials (elsewhere half of random's is under one trial)
    hard = [t for t in tables if base[t.name]["random"]["median_5"] > 2]
    lines = {}
    for n in names:
        ratios = [results[t.name][n]["median_5"] / base[t.name]["random"]["median_5"] for t in hard]
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        met = sum(r <= GOAL for r in ratios)
        lines[n] = {
            "geo_ratio": round(geo, 3),
            "met": met,
            "tables": len(hard),
            "worst": round(max(ratios), 2),
        }
        print(f"{n:50s} geo {geo:.3f}  met {met}/{len(hard)}  worst {max(ratios):.2f}", flush=True)
        if args.detail:
            for t, r in zip(hard, ratios, strict=True):
                rand = base[t.name]["random"]["median_5"]
                print(f"    {t.name:50s} random {rand:5g}  {results[t.name][n]['median_5']:5g}  {r:.2f}")
    if args.out:
        args.out.write_text(json.dumps(lines, indent=1) + "\n")


def split(args: argparse.Namespace) -> None:
    if args.write:
        if SPLIT.exists() and not args.force:
            raise SystemExit(
                "split.json exists: the split is drawn once, before tuning (--force to draw again)"
            )
        SPLIT.write_text(json.dumps(draw_split(all_tables()), indent=1) + "\n")
    print(SPLIT.read_text())


def add_run_arguments(r: argparse.ArgumentParser) -> None:
    """``run``'s arguments (``benchmarks/sampler_replay.py eval`` takes the same)."""
    r.add_argument("--split", choices=["held-out", "train", "all"], default="all")
    r.add_argument(
        "--grid",
        nargs=2,
        action="append",
        metavar=("SPEC", "TABLE"),
        help="a measured grid outside the set (its spec and the table `sampler_replay measure` wrote); "
        "repeat for more: only these are replayed, and --out is needed",
    )
    r.add_argument("--seeds", type=int, default=40)
    r.add_argument("--cap", type=int, default=100, help="trials a seed at most")
    r.add_argument(
        "--jobs", type=int, default=len(os.sched_getaffinity(0)), help="processes (default: the cores)"
    )
    r.add_argument("--gp", action="store_true", help="also nova around Optuna's GPSampler (PyTorch, SciPy)")
    r.add_argument("--only", default="", help="the tables whose name starts so (e.g. cpu-grid/)")
    r.add_argument("--out", type=Path, help=f"the folder for results.json and table.md (default {OUT})")


def quiet() -> None:
    """No warnings and no Optuna log lines: thousands of replayed studies would bury the table."""
    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def main(argv: list[str] | None = None) -> None:
    quiet()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    add_run_arguments(
        sub.add_parser("run", help="replay nova and the baselines on a split and write the table")
    )
    t = sub.add_parser("tune", help="replay variants of nova's sampler on the training split")
    t.add_argument("--variant", action="append", required=True, help="settings, e.g. 'spread=1' (repeat)")
    t.add_argument("--seeds", type=int, default=8)
    t.add_argument("--cap", type=int, default=100)
    t.add_argument(
        "--jobs", type=int, default=len(os.sched_getaffinity(0)), help="processes (default: the cores)"
    )
    t.add_argument("--out", type=Path)
    t.add_argument("--detail", action="store_true", help="each table's figures too")
    s = sub.add_parser("split", help="print the split (--write: draw it, once)")
    s.add_argument("--write", action="store_true")
    s.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    {"run": run, "tune": tune, "split": split}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
