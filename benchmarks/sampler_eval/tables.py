"""What a table is, and the measured ones.

A ``Table`` is a response surface a study could meet: a search space (a spec's ``space`` section, drawn
by ``search.configs.sample`` as a worker draws it), a direction, and a figure per configuration (the
mean of its passes), or the reason it cannot run. Two kinds:

- ``grid``: every configuration of the space is in the table (the measured CPU grids, at each level
  they were measured at; the synthetic surfaces). A configuration the table marks as not launchable
  is told as a worker tells it.
- ``partial``: a recorded study's trials (``benchmarks/results/*/study.db``, read with
  ``nova_search.results.load``): a few configurations of a space that has ranges. **An unmeasured
  configuration takes the figure of the measured configuration nearest to it** (``nearest``: the
  distance nova's sampler spreads its start by, per knob the difference over the range, on a log
  scale where the knob is log; a category that differs counts 1), after nova's compatibility rules
  (``search.rules``: a configuration they refuse is refused, as a worker refuses it). So the replay
  invents no figure, but the surface between measurements is a step function whose steps are as wide
  as the measurements are sparse: a sampler "finds" the best when it lands in the best measurement's
  cell. With 2 to 21 measurements a table, those cells are large and random search lands in the
  best's in one to three trials; such a table cannot show a sampler at half of random's trials, and
  the results table says so.

A table's objective is one figure per configuration: output throughput at one concurrency
(maximize), TTFT p99 / median or TPOT median (minimize), a cost-like combination (TTFT p99 over
output throughput: the latency paid per unit of throughput, minimize), or throughput under an SLO
(maximize throughput; a configuration whose TTFT p99 is over the SLO completes with a violated
constraint, as nova tells a missed condition, and never counts as found).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from nova_search.knobs import EngineConfig
from nova_search.search.configs import sample, stock_config
from nova_search.search.rules import Facts, incompatibilities
from nova_search.search.sampler import distance
from nova_search.spec import StudySpec, parse_spec
from nova_search.testing.specs import minimal_spec_dict

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"


def stage_base(spec: StudySpec, stage: str) -> EngineConfig | None:
    """The configuration a stage draws on (``search.configs.sample``'s ``base``): a replayed
    speculative stage has no tuned trial, so it draws on the spec's stock configuration; None else."""
    return stock_config(spec) if stage == "speculative" else None


def key(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True)


@dataclass(frozen=True)
class Entry:
    """One configuration of a table: its figure (the mean of its passes) or why it cannot run."""

    params: dict[str, Any]
    launchable: bool
    value: float | None = None
    #: > 0: the configuration misses the table's SLO (told as a violated constraint); None: no SLO
    constraint: float | None = None
    reason: str | None = None
    #: each pass's own (figure, constraint), where the table keeps its passes (the measured grids, the
    #: synthetic surfaces); the entry's figure is their mean
    passes: tuple[tuple[float, float | None], ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    #: what the split keeps together: tables of one source are all training or all held out
    source: str
    kind: str  # "grid" or "partial"
    objective: str
    direction: str  # "maximize" or "minimize"
    space: dict[str, Any]
    stage: str = "tune"  # the space.sample stage: tune (no drafter) or joint
    entries: tuple[Entry, ...] = ()
    device: str = "cuda"
    max_model_len: int | None = None
    note: str = ""
    #: the spec the replay draws with (a grid measured with a spec of its own keeps it)
    spec_dict: dict[str, Any] | None = field(default=None, compare=False)
    #: the host facts a synthetic surface's refusals were decided with (``host`` gives every table's)
    facts: Facts | None = field(default=None, compare=False)

    @cached_property
    def spec(self) -> StudySpec:
        if self.spec_dict is not None:
            return parse_spec(self.spec_dict)
        raw = minimal_spec_dict(space=self.space)
        raw["engine"]["device"] = self.device
        if self.max_model_len:
            raw["engine"]["defaults"] = {"max_model_len": self.max_model_len}
        return parse_spec(raw)

    @property
    def host(self) -> Facts | None:
        """The host facts the table's refusals are decided with, which a worker on that host gives its
        sampler (``search.sampler.use_facts``; ``samplers.host_rules`` does the same): a synthetic
        surface's own, a recorded study's device and context length; None for a measured grid, whose
        rows record the rules' answers on its host, not the facts (``samplers.RecordedRules``)."""
        if self.facts is not None or self.kind == "grid":
            return self.facts
        return Facts(device=self.device, model_max_len=self.max_model_len)

    @cached_property
    def searched(self) -> set[str]:
        """The parameters the table's configurations differ in."""
        names = {k for e in self.entries for k in e.params}
        return {k for k in names if len({json.dumps(e.params.get(k)) for e in self.entries}) > 1}

    @cached_property
    def by_key(self) -> dict[str, Entry]:
        return {key(e.params): e for e in self.entries}

    @cached_property
    def best(self) -> float:
        values = [e.value for e in self.entries if e.value is not None and (e.constraint or 0.0) <= 0]
        return max(values) if self.direction == "maximize" else min(values)

    def good(self, value: float | None, within: float, best: float | None = None) -> bool:
        """Whether ``value`` is within ``within`` (a share) of the best (``best``, else the table's)."""
        if value is None:
            return False
        best = self.best if best is None else best
        if self.direction == "maximize":
            return value >= best * (1 - within)
        return value <= best * (1 + within)

    def evaluate(
        self, params: Mapping[str, Any], config: EngineConfig, dists: Mapping[str, BaseDistribution]
    ) -> Entry:
        """The entry a drawn configuration gets: itself (a grid), else the nearest measured one."""
        if self.kind == "grid":
            return self.by_key[key(params)]
        host = self.host
        assert host is not None  # a partial table's: its study's device and context length
        problems = incompatibilities(config, host)
        if problems:
            return Entry(dict(params), launchable=False, reason="; ".join(problems))
        return min(self.entries, key=lambda e: distance(params, e.params, dists))

    def bands_by_pass(self, within: float = 0.05) -> list[set[str]] | None:
        """The configurations within ``within`` of the best under each pass alone (its own best, its
        own constraints); None where the table does not keep two passes of every runnable one."""
        runnable = [e for e in self.entries if e.launchable]
        if not runnable or min(len(e.passes) for e in runnable) < 2:
            return None
        bands = []
        for i in range(2):
            feasible = [(key(e.params), e.passes[i][0]) for e in runnable if (e.passes[i][1] or 0.0) <= 0]
            values = [v for _, v in feasible]
            top = (max if self.direction == "maximize" else min)(values, default=None)
            bands.append({k for k, v in feasible if self.good(v, within, top)})
        return bands

    def census(self) -> dict[str, Any]:
        """What the table holds: configurations, how many run, how many are within 5 % and 10 %, and
        (where it keeps two passes) how many each pass alone puts within 5 % and how many both do."""
        values = [e for e in self.entries if e.launchable]
        feasible = [e for e in values if (e.constraint or 0.0) <= 0]
        bands = self.bands_by_pass()
        return {
            "configurations": len(self.entries),
            "launchable": len(values),
            "feasible": len(feasible),
            "within_5": sum(self.good(e.value, 0.05) for e in feasible),
            "within_10": sum(self.good(e.value, 0.10) for e in feasible),
            "passes_5": None if bands is None else [len(bands[0]), len(bands[1]), len(bands[0] & bands[1])],
        }


# ---------------------------------------------------------------- every configuration of a space


class _Path:
    """A trial for ``search.configs.sample`` that walks one branch of the space's tree: each
    parameter takes the next value of ``path``, or its first value when the path is used up (and the
    parameter's choices are recorded, so the walk knows its siblings)."""

    def __init__(self, path: list[int]) -> None:
        self.path = path
        self.seen: list[list[Any]] = []
        self.params: dict[str, Any] = {}

    def _pick(self, name: str, values: list[Any]) -> Any:
        i = self.path[len(self.seen)] if len(self.seen) < len(self.path) else 0
        self.seen.append(values)
        self.params[name] = values[i]
        return values[i]

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self._pick(name, list(choices))

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
        return self._pick(name, list(range(low, high + 1, step)))

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float:
        raise ValueError(f"space.{name}: a grid needs a list of choices, not a range")


def configurations(
    spec: StudySpec, stage: str = "tune"
) -> Iterator[tuple[dict[str, Any], EngineConfig, float]]:
    """Every configuration ``search.configs.sample`` can draw from ``spec`` (a space of lists and
    integer ranges, conditional parameters included), depth first, with its ``EngineConfig`` and the
    chance ``RandomSampler`` draws it (each parameter's values equally likely). A float range raises
    ``ValueError``."""
    base = stage_base(spec, stage)
    stack: list[list[int]] = [[]]
    while stack:
        path = stack.pop()
        trial = _Path(path)
        config = sample(trial, spec, stage, base)
        weight = 1.0
        for values in trial.seen:
            weight /= len(values)
        for depth in range(len(trial.seen) - 1, len(path) - 1, -1):
            for i in range(len(trial.seen[depth]) - 1, 0, -1):
                stack.append([*path, *([0] * (depth - len(path))), i])
        yield trial.params, config, weight


# ---------------------------------------------------------------- the measured CPU grids

#: a measured grid (``benchmarks/sampler_replay.py measure``): its tables' prefix, its spec, its rows
CPU_GRIDS: dict[str, tuple[Path, Path]] = {
    # 48 configurations at c=32 (the grid nova's start-up count had been chosen on)
    "cpu-grid": (REPO / "benchmarks" / "sampler_replay.yaml", RESULTS / "sampler-replay-cpu" / "table.jsonl"),
    # 36 configurations at c=4 and c=16, measured after the tuning: every table of it is held out
    "cpu-grid-levels": (
        REPO / "benchmarks" / "sampler_replay_levels.yaml",
        RESULTS / "sampler-replay-cpu-levels" / "table.jsonl",
    ),
    # 24 configurations, a prefill-heavy workload at c=8 and c=32, measured after round 12 of the
    # tuning: every table of it is held out
    "cpu-grid-prefill": (
        REPO / "benchmarks" / "sampler_replay_prefill.yaml",
        RESULTS / "sampler-replay-cpu-prefill" / "table.jsonl",
    ),
}


def cpu_grid_tables() -> list[Table]:
    """Each measured CPU grid (two passes of ``vllm bench serve`` a configuration) at each level it was
    measured at, under each objective it measured and two combinations."""
    return [
        t for prefix, (spec, table) in CPU_GRIDS.items() for t in measured_grid_tables(prefix, spec, table)
    ]


def measured_grid_tables(prefix: str, spec_path: Path, table_path: Path) -> list[Table]:
    """A grid measured by ``benchmarks/sampler_replay.py measure`` (``spec_path``: its spec;
    ``table_path``: its rows) as tables: at each level it was measured at, one table an objective
    its rows hold (``prefix/objective@level``). A configuration of the spec's space that the rows do
    not have, or a file that is not there, is a ``SystemExit`` naming it."""
    import yaml

    from benchmarks.sampler_replay import at_level, grid_params, levels_of, read_table
    from nova_search.errors import SpecError
    from nova_search.spec.reader import load_spec

    for path in (spec_path, table_path):
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (a grid is its spec and the table `measure` wrote)")
    try:
        grid = grid_params(load_spec(spec_path))
    except SpecError as e:
        raise SystemExit(f"{spec_path}: {e}") from e
    rows = read_table(table_path)
    if not levels_of(rows):
        raise SystemExit(f"{table_path}: no configuration measured (`measure` writes it)")
    raw = yaml.safe_load(spec_path.read_text())
    out = []
    for level in levels_of(rows):
        here = at_level(rows, level)
        have = {r["key"] for r in here}
        missing = [key(p) for p in grid if key(p) not in have]
        if missing:
            raise SystemExit(
                f"{table_path}: {len(missing)} of the {len(grid)} configurations of {spec_path}'s space "
                f"are not in it at c={level}, e.g. {missing[0]} (`measure` measures the rest)"
            )
        out += _grid_tables(prefix, raw, here, level)
    return out


#: a row's figures, and the objectives that read each (TTFT p99 and throughput make two more)
_METRICS = {
    "output_throughput": "maximize",
    "ttft_p99_ms": "minimize",
    "ttft_median_ms": "minimize",
    "tpot_median_ms": "minimize",
}


def _grid_tables(prefix: str, raw: dict[str, Any], rows: list[dict[str, Any]], level: int) -> list[Table]:
    """One measured grid (``raw``: its spec) at one level: a table an objective its rows hold."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        e = by.setdefault(r["key"], {"params": r["params"], "launchable": r["launchable"], "rows": []})
        if r["launchable"]:
            e["rows"].append(r)
        else:
            e["reason"] = r["reason"]
    runnable = [e for e in by.values() if e["launchable"]]
    held = set(_METRICS)
    for e in runnable:
        for r in e["rows"]:
            held &= set(r)

    def mean(e: dict[str, Any], metric: str) -> float:
        return statistics.fmean(r[metric] for r in e["rows"])

    metrics: dict[str, tuple[str, Any]] = {
        f"{m}@{level}": (d, lambda e, m=m: mean(e, m)) for m, d in _METRICS.items() if m in held
    }
    both = {"ttft_p99_ms", "output_throughput"} <= held
    if both:
        metrics[f"cost@{level}"] = (
            "minimize",
            lambda e: mean(e, "ttft_p99_ms") / mean(e, "output_throughput"),
        )
        slo = statistics.median(mean(e, "ttft_p99_ms") for e in runnable)
        metrics[f"slo_throughput@{level}"] = ("maximize", None)
    hosts = sorted({r["host"] for e in runnable for r in e["rows"] if r.get("host")})
    passes = len({r["pass"] for r in rows if "pass" in r})
    device = (raw.get("engine") or {}).get("device", "cuda")
    out = []
    for objective, (direction, figure) in metrics.items():
        entries = []
        for e in by.values():
            if not e["launchable"]:
                entries.append(Entry(e["params"], False, reason=e["reason"]))
                continue
            ordered = sorted(e["rows"], key=lambda r: r.get("pass", 1))
            if figure is None:  # throughput, with TTFT p99 at most the grid's median as its SLO
                c = mean(e, "ttft_p99_ms") - slo
                each = tuple((r["output_throughput"], r["ttft_p99_ms"] - slo) for r in ordered)
                entries.append(Entry(e["params"], True, mean(e, "output_throughput"), c, passes=each))
            else:
                each = tuple((figure({"rows": [r]}), None) for r in ordered)
                entries.append(Entry(e["params"], True, figure(e), passes=each))
        out.append(
            Table(
                name=f"{prefix}/{objective}",
                source=f"{prefix}/{objective}",
                kind="grid",
                objective=objective,
                direction=direction,
                space=raw["space"],
                entries=tuple(entries),
                device=device,
                spec_dict=raw,
                note=f"measured: {device}{' (' + ', '.join(hosts) + ')' if hosts else ''}, {passes} passes"
                + (f"; SLO TTFT p99 <= {slo:.0f} ms" if figure is None else ""),
            )
        )
    return out


# ---------------------------------------------------------------- recorded GPU studies as partial tables

#: a recorded study as one source: the folders whose storages hold it (the same spec run again is one
#: table, its repeated configurations averaged) and the stage whose search trials it takes
STUDIES: dict[str, tuple[tuple[str, ...], str]] = {
    "h200-qwen3-8b": (("h200-qwen3-8b",), "joint"),
    "h200-qwen3-8b-confirm": (("h200-qwen3-8b-confirm", "h200-qwen3-8b-confirm-2"), "joint"),
    "h200-qwen3-8b-drafters": (("h200-qwen3-8b-drafters",), "speculative"),
    "trained-h200-drafters": (("trained-h200-drafters",), "speculative"),
    "trained-cpu-speculative": (("trained-cpu",), "speculative"),
    "h100-qwen3-30b-a3b-eagle3": (("h100-qwen3-30b-a3b-eagle3",), "speculative"),
}


def study_tables() -> list[Table]:
    """Each recorded study's search trials as partial tables: output throughput at each level every
    measured trial has, and TTFT p99 at the study's own TTFT objective level."""
    from nova_search.db import open_storage, study_names
    from nova_search.results.load import load_results

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = []
    for source, (folders, stage) in STUDIES.items():
        measured: dict[str, dict[str, Any]] = {}
        spec: dict[str, Any] = {}
        for folder in folders:
            url = f"sqlite:///{RESULTS / folder / 'study.db'}"
            names = study_names(open_storage(url, read_only=True), url)
            for parent in sorted({n.split(".")[0] for n in names}):
                results = load_results(parent, url)
                spec = results.spec or {}
                for t in results.trials:
                    if t.role != "search" or t.state != "COMPLETE" or t.stage != stage or not t.params:
                        continue
                    m = measured.setdefault(key(t.params), {"params": t.params, "levels": {}})
                    for lv in t.levels:
                        m["levels"].setdefault(lv.concurrency, []).append(lv)
        space = {k: v for k, v in spec["space"].items() if v is not None}
        defaults = spec.get("engine", {}).get("defaults") or {}
        levels = sorted(set.intersection(*(set(m["levels"]) for m in measured.values())))
        ttft_at = next((o["at"] for o in spec["objectives"] if o["metric"].startswith("ttft")), None)
        objectives = [(f"output_throughput@{c}", "maximize", c, "output_throughput") for c in levels]
        if ttft_at in levels:
            objectives.append((f"ttft_p99_ms@{ttft_at}", "minimize", ttft_at, "ttft_p99_ms"))
        for objective, direction, c, metric in objectives:
            entries = tuple(
                Entry(m["params"], True, statistics.fmean(getattr(lv, metric) for lv in m["levels"][c]))
                for m in measured.values()
            )
            out.append(
                Table(
                    name=f"study/{source}/{objective}",
                    source=f"study/{source}",
                    kind="partial",
                    objective=objective,
                    direction=direction,
                    space=_searched(space),
                    stage=stage,
                    entries=entries,
                    device=spec.get("engine", {}).get("device") or "cuda",
                    max_model_len=defaults.get("max_model_len"),
                    note=f"recorded study: {len(entries)} measured configurations; the nearest one answers",
                )
            )
    return out


def _searched(space: dict[str, Any]) -> dict[str, Any]:
    """A stored space section as a spec takes it (fields a stored spec writes as null left out)."""
    out = dict(space)
    sp = out.get("speculative")
    if isinstance(sp, dict):
        out["speculative"] = {k: v for k, v in sp.items() if v is not None}
    return out
