"""Writing the dashboard: the notes and graphs saved into the study, by one elected worker at a time.

Writing goes through optuna-dashboard's own API (``save_note``, ``save_plotly_graph_object``: study
system attributes, so a finished trial can still get its note). ``after_trial`` is the worker's
``on_trial_done`` and ``after_stage`` its ``on_stage_done`` (the CLI wires them): they never raise;
what cannot be written is said once (``warn_once``), as a warning, and the measurement it describes
is already stored. The writer is elected by a lock that is only tried (``db.StorageLock``, one per
study's notes); which trials are noted is the study's ``schema.NOTED``. ``rewrite_notes``
(``nova-search notes``) writes every note and graph of an existing study again.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial

from nova_search.db import StorageLock, handles, open_storage, storage_errors, study_names
from nova_search.errors import NovaError
from nova_search.measure.objectives import Objective
from nova_search.report.dashboard.graphs import dashboard_figures
from nova_search.report.dashboard.notes import study_note_markdown, trial_note_markdown, verdict_note_markdown
from nova_search.results.load import read_results, results_of
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.schema import NOTED

log = logging.getLogger("nova_search")

_said: set[str] = set()


def warn_once(text: str) -> None:
    """Log ``text`` as a warning the first time it is said in this process."""
    if text not in _said:
        _said.add(text)
        log.warning(text)


def _dashboard_missing() -> bool:
    if importlib.util.find_spec("optuna_dashboard") is None:
        warn_once(
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

    save_note(study, study_note_markdown(results, verdict_note_markdown(results)))
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
        warn_once(f"the dashboard notes and graphs were not written: {type(e).__name__}: {e}")
        return False


class _Unshared:
    """The notes lock of a study in memory: nobody else can write its notes."""

    def attempt(self) -> bool:
        return True

    def release(self) -> None:
        pass


def _notes_lock(study: optuna.Study) -> StorageLock | _Unshared:
    backend = handles.backend_of(study)
    if not isinstance(backend, optuna.storages.RDBStorage):
        return _Unshared()
    return StorageLock(backend.engine, f"{study.study_name}#notes")


def _unnoted(study: optuna.Study) -> tuple[dict[int, int], set[int]]:
    """(number -> trial id of the finished trials of this study whose notes are not written, the
    numbers of those whose notes are), from Optuna's trial cache and the study's system attributes:
    cheap beside ``results_of``, so a worker with nothing to write does not read the whole study (180
    workers leaving a stage at once did, one after the other, under the lock)."""
    noted = set(NOTED.read(handles.storage_of(study).get_study_system_attrs(handles.study_id(study))) or ())
    unnoted = {
        t.number: handles.trial_id(t)
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
    handles.storage_of(study).set_study_system_attr(handles.study_id(study), NOTED.key, NOTED.encode(done))
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
                ids = {t.number: handles.trial_id(t) for t in study.get_trials(deepcopy=False)}
                for t in results.trials:
                    if t.study == name and t.number in ids:
                        write_trial_note(study, t, ids[t.number], results.objectives)
                        written += 1
                refresh_dashboard(study, results)
    finally:
        storage.engine.dispose()
    return written
