"""The study as optuna-dashboard shows it: a markdown note per trial, a study note, plotly graphs.

Pure (from ``results`` records, tested without storage):

- ``trial_note_markdown(trial)``: the per-level profile as a table (concurrency, output tok/s,
  TTFT/TPOT p50 and p99, ITL and E2E p99, errors, KV peak, acceptance when a drafter ran), the launch
  argv in a code block, the failure reason when there is one.
- ``study_note_markdown(results, policy_markdown=None)``: trials by state, stock vs the tuned
  baseline per concurrency, the best trials (the Pareto front), and, when given, a policy section.
- ``dashboard_figures(results)``: graph id -> plotly figure: output throughput and latency (TTFT and
  TPOT p99) against concurrency for stock, the tuned baseline and its runners-up;
  speculative acceptance when a drafter was measured; output tok/s per user against per GPU for every
  trial and level, the front marked. Drawn with ``report.figures``, as the report; every axis titled
  with its unit. A trial note lists the trial's constraints by name and says INFEASIBLE when one
  fails (optuna-dashboard 0.21 reads no Optuna 5 constraint: ``show_named_constraints``).

Writing goes through optuna-dashboard's own API (``save_note``, ``save_plotly_graph_object``: study
system attributes, so a finished trial can still get its note). ``after_trial`` is the worker's
``on_trial_done`` (the CLI wires it): it and ``refresh_dashboard`` never raise; what cannot be written
is said once, as a warning, and the measurement it describes is already stored. ``rewrite_notes``
(``nova-search notes``) writes every note and graph of an existing study again.

Serving: ``open_dashboard`` checks the storage and the artifacts folder (errors name the flag) and
``serve`` runs optuna-dashboard's app with the artifact store wired in, its constraints filled and its
Analytics contour kept drawable (``nova-search dashboard``).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
import re
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial

from nova_search.db import StorageLock, open_storage, storage_error, storage_errors, study_names
from nova_search.errors import NovaError, SpecError, StorageError
from nova_search.measure.objectives import Objective
from nova_search.report.data import acceptance_table, throughput_table, trial_curves, user_gpu_points
from nova_search.report.figures import (
    Series,
    acceptance_series,
    line_figure,
    panel_figure,
    user_gpu_figure,
)
from nova_search.report.markdown import table as md_table
from nova_search.results.cost import gpu_time
from nova_search.results.load import read_results, results_of
from nova_search.results.select import best_trials, objective_of, ranked, stock_trial, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.schema import NOTED

if TYPE_CHECKING:
    import plotly.graph_objects as go

log = logging.getLogger("nova_search")

#: graph ids on the study page (stable, so each refresh overwrites its graph)
GRAPH_THROUGHPUT = "nova-throughput"
GRAPH_LATENCY = "nova-latency"
GRAPH_ACCEPTANCE = "nova-acceptance"
GRAPH_USER_GPU = "nova-user-gpu"
#: runner-up non-speculative trials drawn after the tuned baseline
CANDIDATES = 3
#: speculative trials drawn in the acceptance graph (the best ones by the first objective)
ACCEPTANCE_TRIALS = 5
#: rows of the study note's best-trials table
BEST_ROWS = 10
#: failure messages are cut to this many characters in a note (the whole log is an artifact)
MESSAGE_CHARS = 1500
#: the end of the server log shown in a failed trial's note
LOG_TAIL_CHARS = 1500


# ---------------------------------------------------------------- formatting


def _cell(v: Any, fmt: str = ".4g") -> str:
    """A markdown table cell: None as a dash, floats formatted, pipes escaped."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return format(float(v), fmt)
    return str(v).replace("|", "\\|").replace("\n", " ")


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"


def _fence(text: str, lang: str = "") -> str:
    """A fenced code block that the text cannot close early."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text}\n{fence}"


def _config_label(trial: TrialResult) -> str:
    return trial.config.label() if trial.config else ("vLLM defaults" if trial.is_stock else "")


# ---------------------------------------------------------------- trial note


def trial_note_markdown(trial: TrialResult, objectives: Sequence[Objective] = ()) -> str:
    """The note of one trial: what ran, the per-level profile, how it was launched, why it ended.

    ``objectives`` name the values of a COMPLETE trial."""
    parts = [f"## Trial {trial.key}: {trial.state} ({trial.role})"]
    facts = [f"**configuration:** {_cell(_config_label(trial)) or '–'}"]
    if trial.projected:
        facts.insert(
            0,
            f"**{trial.projected}:** the drafter ran with synthetic acceptance; every figure of this trial "
            "is a projection at that acceptance, not a measurement of the drafter",
        )
    if trial.values is not None and objectives:
        shown = ", ".join(
            f"{o.name} = {_cell(v)}" for o in objectives if (v := objective_of(trial, o)) is not None
        )
        facts.append(
            f"**objectives:** {shown}" + ("" if trial.feasible else " (infeasible: a constraint fails)")
        )
    if trial.engine_version:
        facts.append(f"**engine:** vLLM {_cell(trial.engine_version)}")
    if trial.timing:
        facts.append(
            "**timing:** " + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in trial.timing.items())
        )
    if trial.client_bound_levels:
        facts.append(
            "**client-bound:** the load generator may have set the figures at concurrency "
            + ", ".join(map(str, trial.client_bound_levels))
            + " (see Warnings)"
        )
    parts.append("  \n".join(facts))
    if trial.reason or trial.state in ("FAIL", "PRUNED"):
        message = (trial.message or "").strip()
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + " …"
        parts.append(f"### Why it ended {trial.state}\n\n**{_cell(trial.reason or 'unknown')}**")
        if message:
            parts.append(_fence(message))
        if trial.log_tail and trial.log_tail.strip():
            log_tail = trial.log_tail.strip()
            if len(log_tail) > LOG_TAIL_CHARS:
                log_tail = "… " + log_tail[-LOG_TAIL_CHARS:]
            parts.append(
                "The end of the server log (all of it: the trial's `server.log` artifact):\n\n"
                + _fence(log_tail)
            )
    if trial.levels:
        spec = trial.speculative
        headers = [
            "concurrency",
            "output tok/s",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "TPOT p50 ms",
            "TPOT p99 ms",
            "ITL p99 ms",
            "E2E p99 ms",
            "errors",
            "KV peak",
        ] + (["acceptance"] if spec else [])
        rows = []
        for lv in sorted(trial.levels, key=lambda lv: lv.concurrency):
            row = [
                str(lv.concurrency),
                _cell(lv.output_throughput, ".1f"),
                _cell(lv.ttft_p50_ms, ".1f"),
                _cell(lv.ttft_p99_ms, ".1f"),
                _cell(lv.tpot_p50_ms, ".2f"),
                _cell(lv.tpot_p99_ms, ".2f"),
                _cell(lv.itl_p99_ms, ".2f"),
                _cell(lv.e2e_p99_ms, ".1f"),
                f"{lv.errors}/{lv.requests}",
                _pct(lv.kv_cache_usage_peak),
            ]
            if spec:
                row.append(_pct(lv.spec_acceptance_rate))
            rows.append(row)
        parts.append("### Profile per concurrency\n\n" + md_table(headers, rows))
    elif trial.state != "PRUNED":
        parts.append("No level was measured.")
    if trial.constraints:
        parts.append(_constraints_markdown(trial))
    if trial.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {_cell(w)}" for w in trial.warnings))
    if trial.argv:
        parts.append("### Launch command\n\n" + _fence(shlex.join(trial.argv), "bash"))
    return "\n\n".join(parts) + "\n"


def _constraints_markdown(trial: TrialResult) -> str:
    """Each constraint by its name with its value (Optuna's convention: it holds when <= 0); the
    heading says INFEASIBLE when one fails, so the note says it whatever the dashboard's table shows."""
    broken = [k for k, v in trial.constraints.items() if v > 0.0]
    rows = [[k, _cell(v), "yes" if v <= 0.0 else "**no**"] for k, v in trial.constraints.items()]
    head = "### Constraints: " + (f"INFEASIBLE ({len(broken)} broken)" if broken else "all hold")
    return (
        head
        + "\n\n"
        + md_table(["constraint", "value (holds when <= 0)", "holds"], rows, text=("constraint",))
    )


# ---------------------------------------------------------------- study note


def study_note_markdown(results: StudyResults, policy_markdown: str | None = None) -> str:
    """The study note: where the study stands, stock vs the best tuned trial per concurrency, the best
    trials, and ``policy_markdown`` (a deployment policy, say) as its own section when given."""
    states: dict[str, int] = {}
    for t in results.trials:
        states[t.state] = states.get(t.state, 0) + 1
    budget = f" · budget {results.budget_used}/{results.budget}" if results.budget else ""
    objectives = ", ".join(f"`{o.name}` ({o.direction})" for o in results.objectives) or "none"
    cost = gpu_time(results)
    parts = [
        f"# {results.study_name}",
        _deploy_markdown(results),  # the note opens with what to deploy (results.deploy)
        f"{len(results.trials)} trials: "
        + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none yet")
        + budget
        + f"  \n**objectives:** {objectives}  \n**{cost.text()}**"
        + (f"  \n{held}" if (held := cost.held_text()) is not None else ""),
    ]

    stock, tuned = stock_trial(results), tuned_baseline(results)
    section = ["## Stock vs tuned"]
    if stock is None and tuned is None:
        section.append("No COMPLETE stock baseline and no feasible tuned trial yet.")
    else:
        who = []
        if stock is not None:
            who.append(f"stock: trial {stock.key}")
        else:
            any_stock = results.stock()
            who.append(
                "stock: none"
                if any_stock is None
                else f"stock: trial {any_stock.key} ended {any_stock.state}"
            )
        who.append(
            f"tuned: trial {tuned.key} ({_cell(_config_label(tuned))})"
            if tuned is not None
            else "tuned: no feasible non-speculative trial yet"
        )
        section.append(" · ".join(who))
        rows = []
        for r in throughput_table(stock, tuned):
            s = stock.level(r.concurrency) if stock else None
            t = tuned.level(r.concurrency) if tuned else None
            rows.append(
                [
                    str(r.concurrency),
                    _cell(r.stock_tok_s, ".1f"),
                    _cell(r.tuned_tok_s, ".1f"),
                    "–" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
                    _cell(s.ttft_p99_ms if s else None, ".1f"),
                    _cell(t.ttft_p99_ms if t else None, ".1f"),
                    _cell(s.tpot_p99_ms if s else None, ".2f"),
                    _cell(t.tpot_p99_ms if t else None, ".2f"),
                ]
            )
        if rows:
            section.append(
                md_table(
                    [
                        "concurrency",
                        "stock tok/s",
                        "tuned tok/s",
                        "vs stock",
                        "stock TTFT p99 ms",
                        "tuned TTFT p99 ms",
                        "stock TPOT p99 ms",
                        "tuned TPOT p99 ms",
                    ],
                    rows,
                )
            )
    parts.append("\n\n".join(section))

    front = best_trials(results)
    section = ["## Best trials (Pareto front, feasible)"]
    if front:
        names = [o.name for o in results.objectives]
        rows = [
            [
                t.key,
                t.role,
                *(_cell(objective_of(t, o)) for o in results.objectives),
                _cell(_config_label(t)) + (" (client-bound)" if t.client_bound_levels else ""),
            ]
            for t in front[:BEST_ROWS]
        ]
        section.append(
            md_table(["trial", "role", *names, "configuration"], rows, text=("role", "configuration"))
        )
        if len(front) > BEST_ROWS:
            section.append(f"… and {len(front) - BEST_ROWS} more on the front (`nova-search best`).")
    else:
        section.append("No feasible COMPLETE trial yet.")
    parts.append("\n\n".join(section))

    if policy_markdown and policy_markdown.strip():
        parts.append(policy_markdown.strip())
    parts.append(
        "_Written by nova-search after each trial; edits made here are overwritten. Each trial's note holds "
        "its profile and launch command; its request records and server log are its artifacts._"
    )
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------- graphs


def _curve_series(results: StudyResults, metric: str) -> list[Series]:
    from nova_search.report.figures import STOCK_COLOR, TUNED_COLOR

    colors = {"stock": STOCK_COLOR, "tuned": TUNED_COLOR}
    out = []
    for c in trial_curves(results, candidates=CANDIDATES):
        x, y = c.points(metric)
        out.append(Series(c.label, x, y, colors.get(c.kind)))
    return out


def dashboard_figures(results: StudyResults) -> dict[str, go.Figure]:
    """Graph id -> figure, only for graphs with something to draw."""
    figures: dict[str, go.Figure] = {}
    throughput = _curve_series(results, "output_throughput")
    if any(not s.empty for s in throughput):
        figures[GRAPH_THROUGHPUT] = line_figure(
            throughput,
            title="Output throughput vs concurrency: stock, tuned, runners-up",
            yaxis_title="output tok/s (per server)",
        )
        figures[GRAPH_LATENCY] = panel_figure(
            [
                ("TTFT p99 (ms)", _curve_series(results, "ttft_p99_ms")),
                ("TPOT p99 (ms)", _curve_series(results, "tpot_p99_ms")),
            ],
            title="Latency p99 vs concurrency",
        )
    rows = acceptance_table(results)
    if rows:
        order = {t.key: i for i, t in enumerate(_by_first_objective(results))}
        chosen = sorted({r.trial_number for r in rows}, key=lambda k: (order.get(k, len(order)), k))
        keep = set(chosen[:ACCEPTANCE_TRIALS])
        series = acceptance_series([r for r in rows if r.trial_number in keep])
        if series:
            figures[GRAPH_ACCEPTANCE] = line_figure(
                series,
                title="Speculative decoding: draft acceptance rate",
                yaxis_title="acceptance rate (accepted ÷ drafted tokens)",
            )
    user_gpu = user_gpu_figure(user_gpu_points(results))
    if user_gpu is not None:
        figures[GRAPH_USER_GPU] = user_gpu
    return figures


def _by_first_objective(results: StudyResults) -> list[TrialResult]:
    """COMPLETE trials, best first by the first objective, feasible ones before infeasible ones."""
    if not results.objectives:
        return results.complete()
    first = results.objectives[0]
    feasible = ranked(results.feasible(), first)
    return feasible + ranked([t for t in results.complete() if not t.feasible], first)


# ---------------------------------------------------------------- writing (never raises)

_said: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        log.warning(text)


def _dashboard_missing() -> bool:
    if importlib.util.find_spec("optuna_dashboard") is None:
        _warn_once(
            "optuna-dashboard is not installed in this environment: no dashboard notes or graphs "
            "(pip install optuna-dashboard, then `nova-search notes STUDY` writes them)"
        )
        return True
    return False


def write_trial_note(
    study: optuna.Study, result: TrialResult, trial_id: int, objectives: Sequence[Objective]
) -> None:
    """The trial's note (raises what optuna-dashboard raises)."""
    from optuna_dashboard import save_note

    save_note(optuna.trial.Trial(study, trial_id), trial_note_markdown(result, objectives))


def refresh_dashboard(study: optuna.Study, results: StudyResults) -> None:
    """The study note and the graphs of ``study`` (one Optuna study: a stage's page shows the whole
    staged study). Raises what optuna-dashboard raises.

    Cost: a read of the study's system attributes per write (optuna-dashboard's notes and graphs live
    there, trial notes included); see benchmarks/dashboard_refresh.py."""
    from optuna_dashboard import save_note, save_plotly_graph_object

    save_note(study, study_note_markdown(results, _policy_markdown(results)))
    for graph_id, fig in dashboard_figures(results).items():
        fig.update_layout(template="plotly_white")
        save_plotly_graph_object(study, fig, graph_object_id=graph_id)


#: how many times one worker catches up with the study's notes after a trial before it goes back to
#: its own trials (see ``after_trial``)
NOTE_PASSES = 2
#: how long a worker at the end of a stage waits for another's notes to be written before its own
END_WAIT_S = 120.0


def after_trial(study: optuna.Study, trial: FrozenTrial) -> bool:
    """A worker's ``on_trial_done``: the notes of every trial finished since they were last written,
    then the study note and graphs, from one read of the study, by one worker at a time.

    The writer is elected by a lock that is only tried (``db.StorageLock.attempt``): a worker that
    finds another writing leaves its trial to that one, which reads the study again once it has let
    go (up to ``NOTE_PASSES`` passes) and so sees every trial told while it wrote. Every worker used
    to reread the study and redraw every graph after each of its trials (about 4 s of client CPU a
    trial at 20 trials, growing with the study): at fleet scale the study was redrawn once per trial
    per worker; now once per pass of one worker. A writer that stops after its passes with trials
    left leaves them to the next trial's worker, and ``after_stage`` writes what is left at the end.
    Never raises; False (and a warning, once per kind of failure) when something was not written."""
    return _catch_up(study, wait=False)


def after_stage(study: optuna.Study) -> bool:
    """A worker's ``on_stage_done``: the notes still unwritten when the stage's budget is done, waiting
    up to ``END_WAIT_S`` for a writer at work. Never raises."""
    return _catch_up(study, wait=True)


def _catch_up(study: optuna.Study, wait: bool) -> bool:
    if _dashboard_missing():
        return False
    try:
        if not _unnoted(study)[0]:
            return True  # every finished trial has its note
        lock = _notes_lock(study)
        passes = 1 if wait else NOTE_PASSES  # at the end no trial is told any more: one pass writes the rest
        deadline = time.monotonic() + END_WAIT_S
        while passes:
            if not lock.attempt():
                if wait and time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                return True  # the worker writing them will see this trial (see after_trial)
            try:
                wrote = _write_pending(study)
            finally:
                lock.release()
            if not wrote:
                return True
            passes -= 1
        return True
    except Exception as e:  # noqa: BLE001 - the dashboard is a view; the study carries on without it
        _warn_once(f"the dashboard notes and graphs were not written: {type(e).__name__}: {e}")
        return False


class _Unshared:
    """The notes lock of a study in memory: nobody else can write its notes."""

    def attempt(self) -> bool:
        return True

    def release(self) -> None:
        pass


def _notes_lock(study: optuna.Study) -> StorageLock | _Unshared:
    backend = getattr(study._storage, "_backend", study._storage)
    if not isinstance(backend, optuna.storages.RDBStorage):
        return _Unshared()
    return StorageLock(backend.engine, f"{study.study_name}#notes")


def _unnoted(study: optuna.Study) -> tuple[dict[int, int], set[int]]:
    """(number -> trial id of the finished trials of this study whose notes are not written, the
    numbers of those whose notes are), from Optuna's trial cache and the study's system attributes:
    cheap beside ``results_of``, so a worker with nothing to write does not read the whole study (180
    workers leaving a stage at once did, one after the other, under the lock)."""
    noted = set(NOTED.read(study._storage.get_study_system_attrs(study._study_id)) or ())
    unnoted = {
        t.number: t._trial_id
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished() and t.number not in noted
    }
    return unnoted, noted


def _write_pending(study: optuna.Study) -> bool:
    """Under the notes lock: the notes of this study's finished trials not yet noted, then the study
    note and graphs. False when there was nothing to write."""
    unnoted, noted = _unnoted(study)
    if not unnoted:
        return False
    results = results_of(study)
    pending = [t for t in results.trials if t.study == study.study_name and t.number in unnoted]
    if not pending:
        return False
    for t in pending:
        write_trial_note(study, t, unnoted[t.number], results.objectives)
    refresh_dashboard(study, results)
    done = tuple(sorted(noted | {t.number for t in pending}))
    study._storage.set_study_system_attr(study._study_id, NOTED.key, NOTED.encode(done))
    return True


def rewrite_notes(study_name: str, storage_url: str) -> int:
    """Write every trial note, the study note and the graphs of an existing study again (each stage's
    study of a staged one). Returns the number of trial notes written. Raises NovaError when
    optuna-dashboard is missing, StorageError when the storage cannot be read or written."""
    if importlib.util.find_spec("optuna_dashboard") is None:
        raise NovaError("optuna-dashboard is not installed: pip install optuna-dashboard")
    storage = open_storage(storage_url, read_only=True)
    written = 0
    try:
        results = read_results(storage, storage_url, study_name)
        names = dict.fromkeys(t.study for t in results.trials) or {study_name: None}
        existing = set(study_names(storage, storage_url))
        with storage_errors(storage_url, f"write the notes of {study_name!r} in"):
            for name in names:
                if name not in existing:
                    continue
                study = optuna.load_study(study_name=name, storage=storage)
                ids = {t.number: t._trial_id for t in study.get_trials(deepcopy=False)}
                for t in results.trials:
                    if t.study == name and t.number in ids:
                        write_trial_note(study, t, ids[t.number], results.objectives)
                        written += 1
                refresh_dashboard(study, results)
    finally:
        storage.engine.dispose()
    return written


def _deploy_markdown(results: StudyResults) -> str:
    """The deploy answer, the study note's first section (the one ``policy`` prints); never raises."""
    from nova_search.report.policy import answer_markdown
    from nova_search.results.deploy import deploy_answer

    try:
        return answer_markdown(deploy_answer(results)).strip()
    except Exception as e:  # noqa: BLE001 - the note goes out without it, never fails
        log.warning("no deploy answer in the study note: %s: %s", type(e).__name__, e)
        return f"## What to deploy\n\nNot computed: {type(e).__name__}: {e}"


def _policy_markdown(results: StudyResults) -> str | None:
    """The verdict and policy for the study note, when the study has speculative trials."""
    from nova_search.report.policy import verdict_markdown
    from nova_search.results.speculation import verdict_of

    if not any(t.speculative for t in results.complete()):
        return None
    try:
        return verdict_markdown(verdict_of(results))
    except Exception as e:  # noqa: BLE001 - the note goes out without the verdict, never fails
        log.warning("no verdict in the study note: %s: %s", type(e).__name__, e)
        return None


# ---------------------------------------------------------------- serving (nova-search dashboard)

#: the artifacts folder a worker uses when neither the spec nor --artifacts-dir names one
DEFAULT_ARTIFACTS_DIR = "nova-artifacts"


def open_dashboard(
    storage_url: str, artifacts_dir: str | None
) -> tuple[optuna.storages.RDBStorage, Any, Path | None]:
    """The storage (read as it is: Optuna's tables are never created) and the artifact store for
    optuna-dashboard: (storage, store or None, artifacts folder or None).

    ``artifacts_dir`` None: ``nova-artifacts`` when that folder exists, else no artifacts. Raises
    StorageError naming ``--storage``, SpecError naming ``--artifacts-dir``, NovaError without
    optuna-dashboard."""
    from nova_search.artifacts import filesystem_store

    if importlib.util.find_spec("optuna_dashboard") is None:
        raise NovaError("optuna-dashboard is not installed in this environment: pip install optuna-dashboard")
    try:
        storage = open_storage(storage_url, read_only=True)
        study_names(storage, storage_url)  # fails now, not on the first page load
    except Exception as e:  # noqa: BLE001 - storage_error keeps a driver's kind, never its message
        raise StorageError(f"--storage: {storage_error(storage_url, 'read', e)}") from None
    folder: Path | None
    if artifacts_dir is None:
        folder = Path(DEFAULT_ARTIFACTS_DIR) if Path(DEFAULT_ARTIFACTS_DIR).is_dir() else None
    else:
        folder = Path(artifacts_dir)
        if not folder.is_dir():
            raise SpecError(
                f"--artifacts-dir {artifacts_dir!r}: no such folder (give the folder the workers wrote to)"
            )
    return storage, (filesystem_store(folder) if folder is not None else None), folder


def show_named_constraints() -> bool:
    """Make this process's optuna-dashboard show Optuna 5's constraints; True when it does.

    optuna-dashboard 0.21 serializes a trial's constraints from the list ``system_attrs["constraints"]``
    (what Optuna 4's ``constraints_func`` wrote). Optuna 5's ``trial.set_constraint`` (what the worker
    calls) writes one ``constraints:<name>`` key per constraint instead, so the dashboard's API gives
    ``"constraints": []`` and its pages draw every trial as feasible. Its serializer is wrapped here to
    fill that list from ``FrozenTrial.constraints`` (Optuna's own reading of both forms), in the order
    Optuna gives them. Nothing is written to the study: writing the list form as well would make Optuna
    count each constraint twice (keys "0", "1"... and the names), which changes GPSampler's constraint
    models and makes it refuse a study whose older trials have only the named form ("The number of
    constraints must be the same for all trials"). The plain ``optuna-dashboard`` command still shows
    none; each trial's note lists its constraints by name either way.

    A private function of optuna-dashboard (pinned by tests/integration/test_dashboard.py, which reads
    the constraints back through the API): when it is not there, a warning and False."""
    try:
        from optuna_dashboard import _serializer

        original = _serializer.serialize_frozen_trial
    except (ImportError, AttributeError) as e:
        _warn_once(f"optuna-dashboard will show no constraints (its serializer changed: {e})")
        return False
    if getattr(original, "nova_constraints", False):
        return True

    def serialize_frozen_trial(study_id: int, trial: FrozenTrial, study_system_attrs: dict[str, Any]) -> Any:
        out = original(study_id, trial, study_system_attrs)
        if not out.get("constraints") and trial.constraints:
            out["constraints"] = [float(v) for v in trial.constraints.values()]
        return out

    serialize_frozen_trial.nova_constraints = True  # type: ignore[attr-defined]
    _serializer.serialize_frozen_trial = serialize_frozen_trial
    return True


def drawable_contour(fig: go.Figure) -> go.Figure:
    """The figure without its contour traces when they hold no grid (``z`` None): Optuna's
    ``plot_contour`` gives such a trace, with a warning ("unique value length is less than 2"), while
    a parameter has fewer than two values among the COMPLETE trials, as in every nova study between
    its first and second trials with parameters (the stock trial has none: it runs vLLM's defaults).
    plotly.js throws on it (``TypeError: ... reading 'z'``) and optuna-dashboard 0.21's Analytics page
    goes blank. The markers stay; nothing else changes."""
    empty = [t for t in fig.data if t.type == "contour" and t.z is None]
    if empty:
        fig.data = tuple(t for t in fig.data if not (t.type == "contour" and t.z is None))
    return fig


def keep_analytics_drawable() -> bool:
    """Make this process's optuna-dashboard draw its Analytics contour through ``drawable_contour``;
    True when it does. optuna-dashboard 0.21 draws that page's plots on the server with
    ``optuna.visualization`` (looked up at each request): the wrapper is put there. Pinned by the
    browser test in tests/integration/test_dashboard.py."""
    import optuna.visualization as vis

    original = vis.plot_contour
    if getattr(original, "nova_drawable", False):
        return True

    def plot_contour(*args: Any, **kwargs: Any) -> go.Figure:
        return drawable_contour(original(*args, **kwargs))

    plot_contour.nova_drawable = True  # type: ignore[attr-defined]
    vis.plot_contour = plot_contour
    return True


#: optuna-dashboard 0.21's browser-side contour trace as its minified script spells it (GraphContour.tsx:
#: ``{type: "contour", x: xIndices, y: yIndices, z: zValues, colorscale: "Blues", connectgaps: true, ...}``)
_CONTOUR_TRACE = re.compile(
    rb'\{type:"contour",(?=x:[\w$]+,y:[\w$]+,z:([\w$]+),colorscale:"Blues",connectgaps:!0,)'
)


def drawable_bundle(script: bytes) -> bytes | None:
    """optuna-dashboard's browser script with its contour trace shown only while its grid holds at
    least two distinct values; None when the script does not hold exactly one such trace (another
    release: it is served as it is).

    The Analytics page's default contour (drawn in the browser) fills a grid over the first two
    parameters, one cell per choice, from the COMPLETE trials. While they all sit in one cell (the
    stock trial has no parameters, so a nova study with one other COMPLETE trial is there) the grid
    holds one value, ``connectgaps`` spreads it, plotly.js's automatic contour levels span a zero
    range and, for some values (378.7022069724787, not 378.70), it throws ``TypeError: Cannot read
    properties of undefined (reading 'z')``: the page goes blank. A trace with ``visible: false`` is
    not computed, so the page keeps its markers and draws the contour from the second distinct value
    on. Nothing else in the script changes."""
    patched, found = _CONTOUR_TRACE.subn(
        lambda m: m[0] + b"visible:new Set([].concat(..." + m[1] + b").filter(v=>v!=null)).size>1,", script
    )
    return patched if found == 1 else None


def _serve_drawable_bundle(app: Any) -> bool:
    """Route ``/static/bundle.js`` of optuna-dashboard's app (a bottle app: a fixed route is matched
    before its ``/static/<filename:path>``) to ``drawable_bundle``'s script, gzipped when the browser
    takes it; True when it does. When the script is not the one expected, a warning and False."""
    import bottle
    import optuna_dashboard

    source = Path(optuna_dashboard.__file__).parent / "public" / "bundle.js"
    try:
        script = drawable_bundle(source.read_bytes())
    except OSError as e:
        script, why = None, f"cannot read {source.name} ({e.strerror or e})"
    else:
        why = "its script is not the one this was written for"
    if script is None:
        _warn_once(f"optuna-dashboard's Analytics contour is served as it is: {why}")
        return False
    packed = gzip.compress(script, mtime=0)
    tag = '"' + hashlib.sha256(script).hexdigest()[:32] + '"'

    @app.get("/static/bundle.js")
    def bundle() -> bytes:
        bottle.response.content_type = "text/javascript"
        bottle.response.set_header("ETag", tag)
        bottle.response.set_header("Cache-Control", "no-cache")
        bottle.response.set_header("Vary", "Accept-Encoding")
        if "gzip" in bottle.request.headers.get("Accept-Encoding", ""):
            bottle.response.set_header("Content-Encoding", "gzip")
            return packed
        return script

    return True


def serve(storage: Any, artifact_store: Any, host: str, port: int) -> None:
    """optuna-dashboard (its ``wsgi`` app, run as ``run_server`` runs it) on host:port until
    interrupted, showing Optuna 5's constraints (``show_named_constraints``) and keeping its Analytics
    page drawable (``keep_analytics_drawable`` on the server, ``drawable_bundle`` in the browser).
    Raises NovaError when the address cannot be bound."""
    import bottle
    from optuna_dashboard import wsgi

    show_named_constraints()
    keep_analytics_drawable()
    app = wsgi(storage, artifact_store=artifact_store)
    _serve_drawable_bundle(app)
    try:
        bottle.run(app, host=host, port=port)
    except OSError as e:
        raise NovaError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
