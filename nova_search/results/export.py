"""The export rules: one set, called by ``nova-search export`` and by the API alike.

``export_study(results, fmt, trial=..., ...)`` is the whole command: without ``trial``, the launch the
deployment policy recommends (the deploy answer's, ``results.deploy``: with no range, nothing
qualifies); with one, the trial of that key, refused when nothing shows that it serves
(``servable``: it failed, or measured no level). Either launch is measured on the study's device
(``results.launch.device_of``), made deployable (``results.launch.deployable``) and rendered
(``results.manifests.render``). ``export_launch(trial, fmt, ...)`` does the same for a trial in hand.
The result is an ``Exported``: the text and the launch it was made of (its ``notes`` say every change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nova_search.errors import InputError, NothingQualifies, SpecError
from nova_search.results.deploy import deploy_answer
from nova_search.results.launch import (
    Launch,
    deployable,
    device_of,
    launch_of_policy,
    launch_of_trial,
    measurement_box_notes,
)
from nova_search.results.manifests import EXPORT_FORMATS, render
from nova_search.results.speculation import verdict_of
from nova_search.results.trials import StudyResults, TrialResult


@dataclass(frozen=True)
class Exported:
    """One export: the text to print and the deployable launch it renders."""

    text: str
    launch: Launch


def servable(trial: TrialResult, key: str | None = None) -> None:
    """Refuse a trial that crashed, ran out of memory, broke the error budget, or was refused or
    stopped before one level was measured: nothing shows that it serves. ``key``: how it was named
    (``--trial KEY``); InputError."""
    if trial.state == "FAIL" or not trial.levels:
        why = f" ({trial.reason})" if trial.reason else ""
        raise InputError(
            f"--trial {key or trial.key}: trial {trial.key} is {trial.state}{why} and "
            f"{'measured no level' if not trial.levels else 'failed'}: nothing shows that its "
            "configuration serves (its argv is in `nova-search dump`)"
        )


def _check_format(fmt: str) -> None:
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"--format {fmt!r}: valid: {', '.join(EXPORT_FORMATS)}")


def export_study(
    results: StudyResults,
    fmt: str,
    *,
    trial: str | None = None,
    concurrency: int | None = None,
    model: str | None = None,
    as_measured: bool = False,
    keep_synthetic: bool = False,
    device: str | None = None,
    name: str = "vllm",
    image: str | None = None,
    port: int = 8000,
) -> Exported:
    """What to deploy of a study in ``fmt``: the deployment policy's launch (``concurrency``: the load
    served, where the policy switches by load), or the trial of key ``trial``; made deployable on
    ``device`` (default: the device measured). Raises NothingQualifies when the policy has nothing to
    deploy, SpecError for an unknown key or a bad option, InputError for a trial that does not serve."""
    _check_format(fmt)
    if trial is None:
        # the deploy answer's launch: the one `policy`, `status`, the report and the study note show
        verdict = verdict_of(results)
        answer = deploy_answer(results, verdict)
        if not answer.ranges:
            raise NothingQualifies(f"study {results.study_name!r}: nothing to deploy: {answer.reason}")
        launch = launch_of_policy(results, verdict, concurrency)
    else:
        try:
            chosen = results.trial(trial)
        except KeyError as e:
            raise SpecError(f"--trial: {e.args[0]}") from None
        servable(chosen, trial)
        launch = launch_of_trial(chosen, device=device_of(results))
    exported = _exported(
        launch, fmt, model, as_measured, keep_synthetic, device, name, image, port, results.spec
    )
    return exported


def export_launch(
    trial: TrialResult,
    fmt: str,
    *,
    model: str | None = None,
    as_measured: bool = False,
    keep_synthetic: bool = False,
    name: str = "vllm",
    image: str | None = None,
    port: int = 8000,
    measured_on: str | None = None,
    device: str | None = None,
) -> str:
    """One trial's configuration in ``fmt``, by the same rules as ``export_study``: measured on
    ``measured_on``, deployed on ``device``. Raises NovaError when it never launched a server, and
    InputError when nothing shows that it serves (``servable``)."""
    _check_format(fmt)
    launch = launch_of_trial(trial, device=measured_on)
    servable(trial)
    return _exported(launch, fmt, model, as_measured, keep_synthetic, device, name, image, port).text


def _exported(
    launch: Launch,
    fmt: str,
    model: str | None,
    as_measured: bool,
    keep_synthetic: bool,
    device: str | None,
    name: str,
    image: str | None,
    port: int,
    spec: Mapping[str, Any] | None = None,
) -> Exported:
    ready = deployable(
        launch, model=model, as_measured=as_measured, device=device, keep_synthetic=keep_synthetic
    )
    # what the measurement machine needed, said in the header (the study's stored spec knows it)
    ready = replace(ready, notes=(*ready.notes, *measurement_box_notes(spec, ready)))
    return Exported(render(ready, fmt, name=name, image=image, port=port), ready)
