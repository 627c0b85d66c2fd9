"""The deploy answer: what to run, at which concurrency, with which command, and on what evidence.

One function computes it, ``deploy_answer(results)``, a pure function of ``StudyResults`` (and the
speculative verdict, ``results.speculation.verdict_of``, built when not given). Every place a person
or a script looks shows this one record: ``nova-search policy`` (text, and ``--format json``: the
model's dump), the report's first section ("What to deploy"), the study note in optuna-dashboard,
the end of ``nova-search status``, ``nova-search export`` (no ``--trial``), and the study attribute
``schema.DEPLOY`` (``nova:deploy``) that a script reads with Optuna alone.

It holds:

- the policy's concurrency ranges (``analysis.verdict.build_policy``), each with its configuration
  (trial key and number, role, drafter) and its deployable argv: ``vllm serve MODEL FLAGS`` as the
  trial measured it, without the API key file, host or port (``results.launch.launch_of_policy``: with
  vLLM's dynamic schedule, every range is the one server that carries it);
- the export command (``nova-search export STUDY --storage URL --format vllm``, password masked), with
  ``--concurrency`` per range when the policy switches configuration by load;
- the evidence behind each range: ``verified`` (a drafter verified better than tuned there),
  ``not_enough_evidence`` (a drafter measured there with fewer windows than a verdict needs: how many
  more), ``rejected`` (every drafter measured there, with enough windows, and none verified better), or
  ``no_candidate`` (no speculative trial completed: tuned is the best feasible configuration);
- the nova version, the vLLM version (the engine's ``/version`` the ranges' trials recorded) and the
  device they ran on;
- where the study searched capacity (``spec.capacity``), each range's configuration's capacity at the
  SLO: "this config carries N req/s per GPU at p99 ttft <= X ms" (``results.capacity_table``).

With no tuned baseline (no feasible COMPLETE non-speculative trial) or no objectives, the answer has
no ranges and ``reason`` says why: failures are data, and ``status`` still ends with it.

``store_answer`` writes the answer's JSON to the study attribute (every stage's study of a staged one);
the worker calls it when a stage ends, ``nova-search policy STUDY --write`` for an existing study.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Literal

import optuna
from optuna.storages import RDBStorage

from nova_search import __version__
from nova_search.analysis import projection
from nova_search.analysis.gains import LevelGain
from nova_search.analysis.noise import MIN_SAMPLES
from nova_search.analysis.schedule import PolicyRange
from nova_search.analysis.verdict import DrafterVerdict, Verdict
from nova_search.db import backend_of
from nova_search.errors import NovaError
from nova_search.results.capacity_table import CapacityRow, capacity_row
from nova_search.results.launch import deployable, launch_of_policy, without_synthetic
from nova_search.results.model import OutputModel
from nova_search.results.speculation import verdict_of
from nova_search.results.trials import StudyResults
from nova_search.schema import DEPLOY, PARENT

log = logging.getLogger("nova_search")

#: the answer's JSON format; a reader checks it first. 1: this first version.
DEPLOY_SCHEMA_VERSION = 1

EvidenceStatus = Literal["verified", "not_enough_evidence", "rejected", "no_candidate"]

#: how each evidence status reads in text
EVIDENCE_TEXT = {
    "verified": "verified",
    "not_enough_evidence": "not enough evidence",
    "rejected": "speculation rejected",
    "no_candidate": "no speculative candidate",
}


class Command(OutputModel):
    """A command as an argv list (never a shell string) and as it is shown (shell-quoted)."""

    argv: tuple[str, ...]
    display: str


class LevelEvidence(OutputModel):
    """One drafter's best candidate against tuned at one measured level."""

    concurrency: int
    method: str
    trial: str
    #: the candidate's gain against tuned (%), with its confidence interval
    diff_pct: float | None
    ci_low: float | None
    ci_high: float | None
    #: verified_gain, verified_loss or not_verified (``analysis.noise.compare``)
    verdict: str
    n_tuned: int
    n_candidate: int
    #: windows each side still needs before this level can be judged (0: enough)
    tuned_windows_needed: int
    candidate_windows_needed: int
    #: judged on ABBA pairs against the tuned baseline (confirm)
    paired: bool
    #: "projected at acceptance L=2.6": the candidate ran with synthetic acceptance (a projection)
    projected: str | None = None


class Evidence(OutputModel):
    status: EvidenceStatus
    #: one sentence: why this range deploys what it does
    text: str
    #: per measured level of the range and drafter: the comparison it rests on
    levels: tuple[LevelEvidence, ...] = ()
    #: the most windows any side still needs in this range (0: every level has enough)
    windows_needed: int = 0


class Configuration(OutputModel):
    """The configuration a range deploys: the trial that measured it."""

    trial: str
    study: str
    number: int
    role: str
    #: tuned (non-speculative) or speculative
    choice: Literal["tuned", "speculative"]
    method: str
    num_speculative_tokens: int | None
    #: the knobs that are set, one line (``EngineConfig.label``)
    label: str
    #: "projected at acceptance L=2.6": measured with synthetic acceptance, a projection and not a
    #: measurement of the drafter (``export`` drops the profile)
    projected: str | None = None
    gpus: int
    engine_version: str | None
    device: str | None
    #: the capacity at the SLO the trial measured (``spec.capacity``); null when it did not search
    capacity: CapacityRow | None = None

    @property
    def capacity_text(self) -> str | None:
        """``this config carries 45.2 req/s per GPU at p99 ttft <= 500 ms (...)``, or None."""
        return f"this config {self.capacity.text}" if self.capacity is not None else None


class DeployRange(OutputModel):
    min_concurrency: int
    #: None: no upper bound
    max_concurrency: int | None
    #: ``1–∞``, ``5–16``
    label: str
    configuration: Configuration
    #: ``vllm serve MODEL FLAGS`` as measured: no API key file, host or port
    argv: tuple[str, ...]
    command: str
    #: the measured levels the range rests on
    levels: tuple[int, ...]
    #: a speculative range's largest gain against tuned, the level it was measured at, its interval
    gain_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    gain_level: int | None = None
    #: "projected at acceptance L=2.6" when the range's figures are a projection
    projected: str | None = None
    evidence: Evidence
    export: Command


class DeployAnswer(OutputModel):
    schema_version: Literal[1] = DEPLOY_SCHEMA_VERSION
    study: str
    #: the storage URL, password masked
    storage: str
    #: the ranking metric (the study's first objective) and its direction; None without objectives
    metric: str | None
    higher_is_better: bool | None
    tuned: str | None
    stock: str | None
    ranges: tuple[DeployRange, ...]
    #: the policy switches configuration by load: export asks for --concurrency
    switches_by_load: bool
    #: vLLM's num_speculative_tokens_per_batch_size (one server for every range), else None
    schedule: tuple[tuple[int, int, int], ...] | None
    schedule_note: str
    export: Command | None
    #: what the export still needs before the launch can be deployed (e.g. --model for random weights)
    export_needs: str | None
    nova_version: str
    vllm_version: str | None
    device: str | None
    notes: tuple[str, ...] = ()
    #: why there are no ranges (None when there are)
    reason: str | None = None
    #: the projections the answer rests on ("projected at acceptance L=2.6"); empty: all measured
    projected: tuple[str, ...] = ()

    def range_at(self, concurrency: int) -> DeployRange | None:
        """The range that serves ``concurrency``."""
        return next(
            (
                r
                for r in self.ranges
                if r.min_concurrency <= concurrency
                and (r.max_concurrency is None or concurrency <= r.max_concurrency)
            ),
            None,
        )

    def as_json(self) -> dict:
        return self.model_dump(mode="json")


def range_label(lo: int, hi: int | None) -> str:
    return f"{lo}–{'∞' if hi is None else hi}"


def _command(argv: Sequence[str]) -> Command:
    import shlex

    return Command(argv=tuple(argv), display=shlex.join(argv))


def _export_command(results: StudyResults, concurrency: int | None) -> Command:
    argv = ["nova-search", "export", results.study_name, "--storage", results.storage, "--format", "vllm"]
    if concurrency is not None:
        argv += ["--concurrency", str(concurrency)]
    return _command(argv)


def _level_evidence(d: DrafterVerdict, g: LevelGain) -> LevelEvidence:
    return LevelEvidence(
        concurrency=g.concurrency,
        method=d.method,
        trial=g.trial,
        diff_pct=g.diff_pct,
        ci_low=g.ci_low,
        ci_high=g.ci_high,
        verdict=g.verdict,
        n_tuned=g.n_tuned,
        n_candidate=g.n_candidate,
        tuned_windows_needed=max(MIN_SAMPLES - g.n_tuned, 0),
        candidate_windows_needed=max(MIN_SAMPLES - g.n_candidate, 0),
        paired=g.paired,
        projected=g.projected,
    )


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1f} %"


def evidence_of(r: PolicyRange, verdict: Verdict) -> Evidence:
    """Why a range deploys what it does (see the module docstring for the statuses)."""
    in_range = [
        (d, g)
        for d in verdict.drafters
        for g in d.per_level
        if g.concurrency >= r.min_concurrency
        and (r.max_concurrency is None or g.concurrency <= r.max_concurrency)
    ]
    levels = tuple(_level_evidence(d, g) for d, g in in_range)
    needed = max((max(e.tuned_windows_needed, e.candidate_windows_needed) for e in levels), default=0)
    if r.choice == "speculative":
        shown = [e for e in levels if e.trial == r.trial and e.verdict == "verified_gain"]
        at = ", ".join(str(e.concurrency) for e in shown) or ", ".join(map(str, r.levels))
        ci = f" [{r.ci_low:+.1f}, {r.ci_high:+.1f}]" if r.ci_low is not None and r.ci_high is not None else ""
        text = (
            f"{r.method} k={r.num_speculative_tokens} (trial {r.trial}) verified better than tuned "
            f"(trial {verdict.tuned}) at concurrency {at}: {_pct(r.gain_pct)}{ci} at {r.gain_level}"
        )
        if r.projected:
            text = f"{r.projected}: {text} (a projection, not a measurement of the drafter)"
        return Evidence(status="verified", text=text, levels=levels, windows_needed=0)
    if not verdict.drafters:
        return Evidence(
            status="no_candidate",
            text=f"no speculative trial completed: tuned (trial {r.trial}) is the best feasible "
            "configuration",
        )
    judged = [d for d in verdict.drafters if d.status != "flagged"]
    flagged = [d.method for d in verdict.drafters if d.status == "flagged"]
    kept_out = f"; {', '.join(flagged)} kept out (greedy output diverged)" if flagged else ""
    measured = {d.method for d, _ in in_range}
    unmeasured = [d.method for d in judged if d.method not in measured]
    if not r.levels:
        return Evidence(
            status="not_enough_evidence",
            text=f"no level of the sweep lies in {range_label(r.min_concurrency, r.max_concurrency)}: "
            "tuned, since speculation is deployed only where it was verified" + kept_out,
            levels=levels,
            windows_needed=MIN_SAMPLES,
        )
    if needed > 0 or unmeasured:
        short = sorted(
            {e.concurrency for e in levels if e.tuned_windows_needed or e.candidate_windows_needed}
        )
        parts = []
        if short:
            parts.append(
                f"fewer than {MIN_SAMPLES} windows a side at concurrency {', '.join(map(str, short))} "
                f"(up to {needed} more needed: sweep.repeats >= {MIN_SAMPLES})"
            )
        if unmeasured:
            parts.append(f"{', '.join(unmeasured)} not measured in this range")
        return Evidence(
            status="not_enough_evidence",
            text="tuned until speculation is judged: " + "; ".join(parts) + kept_out,
            levels=levels,
            windows_needed=max(needed, MIN_SAMPLES if unmeasured else 0),
        )
    if not judged:
        return Evidence(
            status="rejected", text="every drafter's greedy output diverged from tuned", levels=levels
        )
    losses = sorted({e.concurrency for e in levels if e.verdict == "verified_loss"})
    loss = f" (a verified loss at {', '.join(map(str, losses))})" if losses else ""
    text = (
        f"{', '.join(d.method for d in judged)} measured here with enough windows and never verified better "
        f"than tuned{loss}" + kept_out
    )
    if projected := [f"{d.method} {d.projected}" for d in judged if d.projected]:
        text += f" ({'; '.join(projected)}: a projection, not a measurement of the drafter)"
    return Evidence(status="rejected", text=text, levels=levels)


def _configuration(results: StudyResults, r: PolicyRange) -> Configuration:
    t = results.trial(r.trial)
    return Configuration(
        trial=r.trial,
        study=r.study,
        number=r.number,
        role=t.role,
        choice=r.choice,
        method=r.method,
        num_speculative_tokens=r.num_speculative_tokens,
        label=t.config.label() if t.config else "vLLM defaults",
        projected=projection.label(t.config),
        gpus=t.gpus,
        engine_version=t.engine_version,
        device=t.device_name,
        capacity=capacity_row(r.choice, t),
    )


def _one(values: Iterable[str | None]) -> str | None:
    """The values, deduplicated in order, joined; None when there is none."""
    seen = list(dict.fromkeys(v for v in values if v))
    return ", ".join(seen) or None


def _empty(results: StudyResults, reason: str, verdict: Verdict | None = None) -> DeployAnswer:
    return DeployAnswer(
        study=results.study_name,
        storage=results.storage,
        metric=verdict.metric if verdict else None,
        higher_is_better=verdict.higher_is_better if verdict else None,
        tuned=None,
        stock=verdict.stock if verdict else None,
        ranges=(),
        switches_by_load=False,
        schedule=None,
        schedule_note="",
        export=None,
        export_needs=None,
        nova_version=__version__,
        vllm_version=None,
        device=None,
        notes=verdict.notes if verdict else (),
        reason=reason,
    )


def _export_needs(results: StudyResults, verdict: Verdict) -> str | None:
    """What ``export`` needs before the measured launch can be deployed (``launch.deployable``)."""
    launches = [launch_of_policy(results, verdict, r.min_concurrency) for r in verdict.policy]
    try:
        for launch in launches:
            deployable(launch)
        return None
    except NovaError:
        pass
    flags = {f for launch in launches for f in launch.flags}
    why = (
        "the study measured random weights (--load-format dummy)"
        if "dummy" in flags and "--load-format" in flags
        else f"the study names the model by a path relative to the worker's folder ({launches[0].model})"
    )
    return f"add --model with the real model's path or hub id: {why}"


def deploy_answer(results: StudyResults, verdict: Verdict | None = None) -> DeployAnswer:
    """The deploy answer of a study (see the module docstring). ``verdict``: the study's
    ``verdict_of(results)``, computed when not given."""
    if verdict is None:
        if not results.objectives:
            return _empty(results, f"study {results.study_name!r} has no objectives: nothing to rank by")
        verdict = verdict_of(results)
    if not verdict.policy:
        return _empty(
            results,
            "no feasible COMPLETE non-speculative trial yet: no tuned baseline, nothing to deploy",
            verdict,
        )
    switches = verdict.schedule is None and len({r.trial for r in verdict.policy}) > 1
    ranges = []
    for r in verdict.policy:
        launch = launch_of_policy(results, verdict, r.min_concurrency)
        # what to run: a synthetic acceptance profile is the measurement's, never the deployment's
        launch = replace(launch, flags=tuple(without_synthetic(list(launch.flags))[0]))
        ranges.append(
            DeployRange(
                min_concurrency=r.min_concurrency,
                max_concurrency=r.max_concurrency,
                label=range_label(r.min_concurrency, r.max_concurrency),
                configuration=_configuration(results, r),
                argv=launch.argv,
                command=_command(launch.argv).display,
                levels=r.levels,
                gain_pct=r.gain_pct,
                ci_low=r.ci_low,
                ci_high=r.ci_high,
                gain_level=r.gain_level,
                projected=r.projected,
                evidence=evidence_of(r, verdict),
                export=_export_command(results, r.min_concurrency if switches else None),
            )
        )
    needs = _export_needs(results, verdict)
    return DeployAnswer(
        study=results.study_name,
        storage=results.storage,
        metric=verdict.metric,
        higher_is_better=verdict.higher_is_better,
        tuned=verdict.tuned,
        stock=verdict.stock,
        ranges=tuple(ranges),
        switches_by_load=switches,
        schedule=verdict.schedule,
        schedule_note=verdict.schedule_note,
        export=_export_command(results, None),
        export_needs=needs,
        nova_version=__version__,
        vllm_version=_one(r.configuration.engine_version for r in ranges),
        device=_one(r.configuration.device for r in ranges),
        notes=verdict.notes,
        projected=tuple(dict.fromkeys(r.projected for r in verdict.policy if r.projected)),
    )


# ---------------------------------------------------------------- stored for automation


def store_answer(storage: RDBStorage, answer: DeployAnswer, study_names: Iterable[str]) -> None:
    """The answer's JSON as the ``nova:deploy`` attribute of each named Optuna study (every stage's
    study of a staged one, so that a script reading any of them finds it). Raises what Optuna raises."""
    payload = answer.as_json()
    for name in dict.fromkeys(study_names):
        storage.set_study_user_attr(storage.get_study_id_from_name(name), DEPLOY.key, payload)


def parts_of(results: StudyResults, fallback: str) -> list[str]:
    """The Optuna studies a study's answer is stored on: its stages' studies, else itself."""
    return list(dict.fromkeys(t.study for t in results.trials if t.study)) or [fallback]


def write_answer(storage: RDBStorage, url: str, study_name: str) -> DeployAnswer:
    """Compute the answer of a study (a staged one by its name) and store it; returns it."""
    from nova_search.results.load import read_results

    results = read_results(storage, url, study_name)
    answer = deploy_answer(results)
    store_answer(storage, answer, parts_of(results, study_name))
    return answer


def write_answer_of(study: optuna.Study) -> bool:
    """The worker's call when a stage ends: the answer of the nova study ``study`` belongs to,
    stored. Never raises (the measurements are stored already); False and a warning when it was not
    written."""
    backend = backend_of(study)
    if not isinstance(backend, RDBStorage):
        return False
    try:
        write_answer(backend, backend.url, PARENT.read(study.user_attrs) or study.study_name)
        return True
    except Exception as e:  # noqa: BLE001 - a summary of the study never costs the study
        log.warning("the deploy answer (nova:deploy) was not written: %s: %s", type(e).__name__, e)
        return False
