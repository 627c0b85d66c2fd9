"""What to deploy: a ``Launch``, the engine flags a trial ran (host, port and nova's own launcher
removed), where they came from and the device they were measured on (``device_of``: the spec's
``engine.device``); and that launch made safe to deploy (``deployable``).

``launch_of_trial`` takes one trial; ``launch_of_policy`` takes what the study's deployment policy
recommends (the one answer ``policy`` gives, see ``results.deploy``). ``split_launch`` reads a stored
argv into entry point, model and flags; ``serve_argv`` is a trial's launch as ``vllm serve MODEL
FLAGS``; ``flag_value``, ``without_flag`` and ``with_flag_value`` read and change one flag of a flag
list (``--flag V`` or ``--flag=V``).

``deployable(launch, model=..., device=...)`` refuses what a study may run but a deployment must not:
random weights (``--load-format dummy``), a model path relative to the worker's folder, and a device
other than the one measured (a CPU study says nothing about a GPU: its flags, ``--gpu-memory-utilization``
as a share of host memory and ``--enforce-eager``, and its numbers are the CPU's). ``--model`` (the
real path or hub id) fixes the first two: it replaces the model and the served name, and drops the
dummy load format. Memory fractions are rounded down to two decimals (never more memory than was
measured). A synthetic acceptance profile is dropped unless kept (``without_synthetic``); secret
flags always are. Every change is said in the output's header. ``as_measured=True`` exports the flags
verbatim, with a warning (the device is still checked).

The export command's rules are ``results.export``; the formats (vllm, compose, k8s) ``results.manifests``.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nova_search import redact
from nova_search.analysis.verdict import Verdict
from nova_search.engine.command import API_SERVER_MODULE, deployable_argv
from nova_search.errors import InputError, NothingQualifies, SpecError
from nova_search.knobs import KNOBS
from nova_search.results.trials import StudyResults, TrialResult

#: the devices a study measures on (the spec's ``engine.device``) and an export targets
DEVICES: tuple[str, ...] = ("cuda", "cpu")
#: flags whose value is a fraction, rounded down to this many decimals for deployment
FRACTION_FLAGS = {"--gpu-memory-utilization": 2}


@dataclass(frozen=True)
class Launch:
    """What to deploy: the model, its engine flags, and where they came from."""

    model: str | None
    flags: tuple[str, ...]
    gpus: int
    engine_version: str | None
    source: str
    #: what was changed on the way to a deployment, said in the output's header
    notes: tuple[str, ...] = ()
    #: ``cuda`` or ``cpu``: where it was measured (after ``deployable``: where it runs); None: unknown
    device: str | None = None

    @property
    def argv(self) -> tuple[str, ...]:
        return ("vllm", "serve", *((self.model,) if self.model else ()), *self.flags)


def split_launch(argv: tuple[str, ...] | list[str]) -> tuple[list[str], str | None, list[str]]:
    """A stored argv -> (entry point, model, engine flags). ``python -m ...api_server --model M``
    gives the model of ``--model``; any other form (``vllm serve M ...``, a wrapper) takes the
    argument before the first flag as the model. Flags keep their order."""
    args = list(argv)
    if "--model" in args:
        i = args.index("--model")
        model = args[i + 1] if i + 1 < len(args) else None
        entry, flags = args[:i], args[i + 2 :]
        if API_SERVER_MODULE not in entry:
            first = next((j for j, a in enumerate(entry) if a.startswith("--")), len(entry))
            flags, entry = entry[first:] + flags, entry[:first]
        return entry, model, flags
    first = next((j for j, a in enumerate(args) if a.startswith("--")), len(args))
    if first == 0:
        return [], None, args
    return args[: first - 1], args[first - 1], args[first:]


def without_flag(flags: list[str], flag: str) -> list[str]:
    """``flags`` without ``flag`` and its value (``--flag V`` or ``--flag=V``)."""
    out, skip = [], False
    for a in flags:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def with_flag_value(flags: list[str], flag: str, value: str) -> list[str]:
    """``flags`` with ``flag``'s value replaced where it stands (``--flag V`` or ``--flag=V``)."""
    out = list(flags)
    for i, a in enumerate(out):
        if a == flag and i + 1 < len(out):
            out[i + 1] = value
        elif a.startswith(flag + "="):
            out[i] = f"{flag}={value}"
    return out


def flag_value(flags: tuple[str, ...] | list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``flags`` (``--flag V`` or ``--flag=V``); None when it is not there."""
    for i, a in enumerate(flags):
        if a == flag and i + 1 < len(flags):
            return flags[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def serve_argv(argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The deployable argv of one trial's stored launch argv: ``vllm serve MODEL FLAGS`` without the
    API key file, host, port or nova's own flags (what ``launch_of_trial(trial).argv`` gives); () for
    a trial that never launched."""
    if not argv:
        return ()
    _entry, model, flags = split_launch(deployable_argv(argv))
    return ("vllm", "serve", *((model,) if model else ()), *flags)


def device_of(results: StudyResults) -> str | None:
    """The device the study measured on: its spec's ``engine.device`` (the spec's default, cuda, when
    the engine names none); None for a study whose spec has no engine (one nova did not create)."""
    engine = (results.spec or {}).get("engine")
    if not isinstance(engine, dict):
        return None
    device = engine.get("device") or "cuda"
    return device if device in DEVICES else None


def launch_of_trial(trial: TrialResult, source: str | None = None, device: str | None = None) -> Launch:
    """The launch a trial ran, measured on ``device``. Raises NovaError when it never launched a
    server."""
    if not trial.argv:
        raise InputError(f"trial {trial.key} has no launch argv ({trial.state}: it never launched a server)")
    _entry, model, flags = split_launch(trial.deployable_argv)
    return Launch(
        model=model,
        flags=tuple(flags),
        gpus=trial.config.gpus if trial.config else 1,
        engine_version=trial.engine_version,
        source=source or f"trial {trial.key} ({trial.role}, {trial.state})",
        device=device,
    )


def launch_of_policy(results: StudyResults, verdict: Verdict, concurrency: int | None = None) -> Launch:
    """What the deployment policy recommends: its one configuration, or its one server with vLLM's
    dynamic schedule, or (policies that switch configuration by load) the range that serves
    ``concurrency``. Raises SpecError when the policy has several configurations and no concurrency
    was given, NovaError when it has none."""
    if not verdict.policy:
        raise NothingQualifies(f"study {results.study_name!r} has no tuned baseline yet: nothing to deploy")
    device = device_of(results)
    if verdict.schedule:
        r = next(r for r in verdict.policy if r.choice == "speculative")
        base = launch_of_trial(results.trial(r.trial), device=device)
        payload = flag_value(base.flags, "--speculative-config") or "{}"
        spec = json.loads(payload)
        spec["num_speculative_tokens_per_batch_size"] = [list(x) for x in verdict.schedule]
        spec["num_speculative_tokens"] = max(int(x[2]) for x in verdict.schedule)
        flags = [*without_flag(list(base.flags), "--speculative-config")]
        flags += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        return replace(
            base,
            flags=tuple(flags),
            source=f"the deployment policy of {results.study_name}: one server, {r.method} with vLLM's "
            f"dynamic schedule {json.dumps(spec['num_speculative_tokens_per_batch_size'])} (trial {r.trial})",
        )
    ranges = list(verdict.policy)
    configs = {r.trial for r in ranges}
    if len(configs) == 1:
        r = ranges[0]
        what = (
            "the tuned configuration" if r.choice == "tuned" else f"{r.method} k={r.num_speculative_tokens}"
        )
        return launch_of_trial(
            results.trial(r.trial),
            f"the deployment policy of {results.study_name}: {what} at every concurrency (trial {r.trial})",
            device,
        )
    shown = "; ".join(
        f"{r.min_concurrency}-{'inf' if r.max_concurrency is None else r.max_concurrency}: "
        f"{'tuned' if r.choice == 'tuned' else f'{r.method} k={r.num_speculative_tokens}'} (trial {r.trial})"
        for r in ranges
    )
    if concurrency is None:
        raise SpecError(
            f"--concurrency: the policy of {results.study_name} deploys different configurations by load "
            f"({shown}); give --concurrency C for the load you serve, or --trial KEY"
        )
    r = next(
        r
        for r in ranges
        if r.min_concurrency <= concurrency and (r.max_concurrency or concurrency) >= concurrency
    )
    return launch_of_trial(
        results.trial(r.trial),
        f"the deployment policy of {results.study_name} at concurrency {concurrency}: range {shown}",
        device,
    )


#: the ``--speculative-config`` keys of a synthetic acceptance profile (spec/acceptance.py)
SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_length", "synthetic_acceptance_rates")


def without_synthetic(flags: list[str]) -> tuple[list[str], str | None]:
    """``flags`` with a synthetic acceptance profile taken out of ``--speculative-config``, and the note
    that says so (None when there was none). Synthetic acceptance is a projection: deployed, the
    drafter's real acceptance is what it is, and a server with the profile would serve outputs whose
    acceptance ignores the drafter."""
    payload = flag_value(flags, "--speculative-config")
    if not payload:
        return flags, None
    try:
        spec = json.loads(payload)
    except ValueError:
        return flags, None
    if not isinstance(spec, dict) or spec.get("rejection_sample_method") != "synthetic":
        return flags, None
    length = spec.get("synthetic_acceptance_length")
    rates = spec.get("synthetic_acceptance_rates")
    asked = f"length {length}" if length is not None else f"rates {rates}"
    for k in SYNTHETIC_KEYS:
        spec.pop(k, None)
    out = [
        *without_flag(flags, "--speculative-config"),
        "--speculative-config",
        json.dumps(spec, separators=(",", ":")),
    ]
    note = (
        f"synthetic acceptance ({asked}) dropped: the study's figures for this drafter are projected at "
        "that acceptance, not measured; the export runs the drafter with its real acceptance (measure it "
        "before relying on the gain; --keep-synthetic-acceptance keeps the profile)"
    )
    return out, note


def deployable(
    launch: Launch,
    *,
    model: str | None = None,
    as_measured: bool = False,
    device: str | None = None,
    keep_synthetic: bool = False,
) -> Launch:
    """The launch made safe to deploy on ``device`` (default: the one it was measured on; see the
    module docstring). Raises SpecError naming ``--device`` when the target device is not the measured
    one, and naming ``--model`` when the measured launch cannot be deployed as it is and no model was
    given. The result's ``device`` is the target."""
    if device is not None and device not in DEVICES:
        raise SpecError(f"--device {device!r}: valid: {', '.join(DEVICES)}")
    if device and launch.device and device != launch.device:
        raise SpecError(
            f"--device {device}: {launch.source} was measured on {launch.device}; its flags "
            f"({shlex.join(launch.flags)}) and its numbers say nothing about {device}. Run the study on "
            f"{device} and export that, or export for {launch.device} (--device {launch.device}, the default)"
        )
    flags = list(launch.flags)
    notes = list(launch.notes)
    if keep_synthetic:
        if without_synthetic(flags)[1] is not None:
            notes.append(
                "WARNING: synthetic acceptance kept (--keep-synthetic-acceptance): acceptance follows the "
                "profile, not the drafter; a benchmark launch, not a deployment"
            )
    else:
        flags, dropped = without_synthetic(flags)
        if dropped:
            notes.append(dropped)
    flags, secret_flags = _without_secret_flags(flags)
    if secret_flags:
        notes.append(
            f"{', '.join(secret_flags)} dropped (a study made before the spec refused a secret in argv "
            "stored it, masked): the export passes VLLM_API_KEY and HF_TOKEN from the environment"
        )
    launch = replace(launch, flags=tuple(flags))
    target = device or launch.device or "cuda"
    if launch.device is None:
        notes.append(
            f"WARNING: the study does not say which device it measured on: exported for {target} "
            "(check the flags fit it)"
        )
    dummy = flag_value(flags, "--load-format") == "dummy"
    relative = launch.model is not None and _relative_path(launch.model)
    if as_measured:
        if dummy or relative:
            notes.append(
                "WARNING: exported as measured: "
                + ", ".join(
                    w
                    for w, bad in (
                        ("random weights (--load-format dummy)", dummy),
                        (f"a relative model path ({launch.model})", relative),
                    )
                    if bad
                )
            )
        return replace(launch, notes=tuple(notes), device=target)
    if model is None and (dummy or relative):
        problems = []
        if dummy:
            problems.append("ran with --load-format dummy (random weights)")
        if relative:
            problems.append(f"names the model by a path relative to the worker's folder ({launch.model!r})")
        raise SpecError(
            f"--model: {launch.source} {' and '.join(problems)}; give --model with the real model's path "
            "or hub id (or --as-measured to export exactly what was measured)"
        )
    if model is not None:
        if model != launch.model:
            notes.append(f"model: {model} (the study measured {launch.model})")
        served = flag_value(flags, "--served-model-name")
        if served is not None and served != model:
            # the measured name belongs to the measured model: clients ask for the one deployed
            flags = with_flag_value(flags, "--served-model-name", model)
            notes.append(f"--served-model-name {model} (the study served {served})")
        if dummy:
            flags = without_flag(flags, "--load-format")
            notes.append("--load-format dummy dropped: the real weights load")
    for flag, decimals in FRACTION_FLAGS.items():
        text = flag_value(flags, flag)
        if text is None:
            continue
        try:
            v = float(text)
        except ValueError:
            continue
        rounded = math.floor(v * 10**decimals + 1e-9) / 10**decimals
        if f"{rounded:g}" != text:
            i = flags.index(flag)
            flags[i + 1] = f"{rounded:g}"
            notes.append(f"{flag} {rounded:g} (rounded down from {text})")
    return replace(launch, model=model or launch.model, flags=tuple(flags), notes=tuple(notes), device=target)


def measurement_box_notes(spec: Mapping[str, Any] | None, launch: Launch) -> list[str]:
    """What in ``launch`` (and around it) belongs to the machine the study measured on rather than to
    the search, from the study's stored ``spec``, each as a header note: a knob fixed in
    ``engine.defaults`` and not searched (``--gpu-memory-utilization 0.05`` for a small CPU box: on a
    CPU, a share of host memory), the study's ``engine.extra_args`` still in the flags, the cores it
    was pinned to (``engine.cpus``) and the ``engine.env`` names it set (not carried into an export;
    names only, never values)."""
    engine = (spec or {}).get("engine")
    if not isinstance(engine, dict):
        return []
    space = (spec or {}).get("space") or {}
    notes = []
    defaults = engine.get("defaults") or {}
    for knob in KNOBS:
        value = defaults.get(knob.name) if isinstance(defaults, dict) else None
        if value is None or space.get(knob.name) is not None:
            continue
        shown = flag_value(launch.flags, knob.flag)
        if shown is None and knob.flag not in launch.flags:
            continue
        host = " (on a CPU: the share of host memory)" if knob.name == "gpu_memory_utilization" else ""
        notes.append(
            f"measurement-box setting: {knob.flag} {shown or value}{host} was fixed for the machine the "
            "study measured on (engine.defaults), not searched: set it for the machine you deploy on"
        )
    extra = [a for a in engine.get("extra_args") or () if isinstance(a, str)]
    kept = [a for a in extra if a in launch.flags]
    if kept:
        notes.append(
            f"measurement-box setting: {shlex.join(kept)} came from the study's engine.extra_args (every "
            "trial had them, none was searched): keep only what the deployment needs"
        )
    cpus = engine.get("cpus")
    if cpus:
        notes.append(
            f"measurement-box setting: the study pinned each server to cores {cpus} (engine.cpus); this "
            "export pins nothing, and its figures are for a server on that many cores"
        )
    env = engine.get("env")
    if isinstance(env, dict) and env:
        notes.append(
            f"measurement-box setting: the study set engine.env {', '.join(sorted(map(str, env)))} for "
            "every server; not carried into this export: set what the deployment needs"
        )
    return notes


def _without_secret_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """``flags`` without any secret flag (``redact.secret_flag``: ``--hf-token``, ``--api-key``, in any
    spelling) and its value, and the flags dropped."""
    out: list[str] = []
    dropped: list[str] = []
    skip = False
    for i, a in enumerate(flags):
        if skip:
            skip = False
            continue
        flag = redact.secret_flag(a)
        if flag is None:
            out.append(a)
            continue
        dropped.append(flag)
        nxt = flags[i + 1] if i + 1 < len(flags) else "-"
        skip = "=" not in a and not nxt.startswith("-")
    return out, dropped


def _relative_path(model: str) -> bool:
    """A local path relative to the worker's folder: ``./m``, ``.nova/tiny-model``, ``~/m``, ``a/b/c``.
    A hub id (``Qwen/Qwen3-8B``: one slash, or ``gpt2``: none) and an absolute path are not."""
    if model.startswith("/"):
        return False
    return model.startswith((".", "~")) or model.count("/") > 1
