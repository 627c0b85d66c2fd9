"""A measured configuration, ready to deploy: ``vllm serve`` command, docker compose, Kubernetes.

What to deploy is a ``Launch``: the engine flags a trial ran (host, port and nova's own launcher
removed) and where they came from. ``launch_of_trial`` takes one trial; ``launch_of_policy`` takes what
the study's deployment policy recommends (the one answer ``policy`` gives, see ``results.verdict``).

``deployable(launch, model=...)`` refuses what a study may run but a deployment must not: random
weights (``--load-format dummy``) and a model path relative to the worker's folder. ``--model`` (the
real path or hub id) fixes both: it replaces the model and drops the dummy load format. Memory
fractions are rounded down to two decimals (never more memory than was measured). Every change is
said in the output's header. ``as_measured=True`` exports the flags verbatim, with a warning.

Formats (``render``):

- ``vllm``: ``vllm serve MODEL FLAGS`` (shell-quoted), the API key from ``VLLM_API_KEY``.
- ``compose``: one service on ``vllm/vllm-openai`` (tagged with the engine version the trial measured),
  the API key from the environment, the port, ``/dev/shm``, the model folder mounted read-only, GPUs.
- ``k8s``: a Service and a Deployment: the API key from a Secret, volumes for the model and
  ``/dev/shm``, GPU and CPU/memory requests, a readiness probe, no privilege escalation, every
  capability dropped, the runtime's default seccomp profile.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

import yaml

from nova_search.analysis.verdict import Verdict
from nova_search.engine.command import API_SERVER_MODULE, deployable_argv
from nova_search.errors import NovaError, SpecError
from nova_search.results.trials import StudyResults, TrialResult

EXPORT_FORMATS: tuple[str, ...] = ("vllm", "compose", "k8s")
#: where the k8s and compose exports mount the model folder in the container
MODEL_MOUNT = "/models"
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


def _without(flags: list[str], flag: str) -> list[str]:
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


def _value(flags: tuple[str, ...] | list[str], flag: str) -> str | None:
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


def launch_of_trial(trial: TrialResult, source: str | None = None) -> Launch:
    """The launch a trial ran. Raises NovaError when it never launched a server."""
    if not trial.argv:
        raise NovaError(f"trial {trial.key} has no launch argv ({trial.state}: it never launched a server)")
    _entry, model, flags = split_launch(trial.deployable_argv)
    return Launch(
        model=model,
        flags=tuple(flags),
        gpus=trial.config.gpus if trial.config else 1,
        engine_version=trial.engine_version,
        source=source or f"trial {trial.key} ({trial.role}, {trial.state})",
    )


def launch_of_policy(results: StudyResults, verdict: Verdict, concurrency: int | None = None) -> Launch:
    """What the deployment policy recommends: its one configuration, or its one server with vLLM's
    dynamic schedule, or (policies that switch configuration by load) the range that serves
    ``concurrency``. Raises SpecError when the policy has several configurations and no concurrency
    was given, NovaError when it has none."""
    if not verdict.policy:
        raise NovaError(f"study {results.study_name!r} has no tuned baseline yet: nothing to deploy")
    if verdict.schedule:
        r = next(r for r in verdict.policy if r.choice == "speculative")
        base = launch_of_trial(results.trial(r.trial))
        payload = _value(base.flags, "--speculative-config") or "{}"
        spec = json.loads(payload)
        spec["num_speculative_tokens_per_batch_size"] = [list(x) for x in verdict.schedule]
        spec["num_speculative_tokens"] = max(int(x[2]) for x in verdict.schedule)
        flags = [*_without(list(base.flags), "--speculative-config")]
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
    )


def deployable(launch: Launch, *, model: str | None = None, as_measured: bool = False) -> Launch:
    """The launch made safe to deploy (see the module docstring). Raises SpecError naming
    ``--model`` when the measured launch cannot be deployed as it is and no model was given."""
    flags = list(launch.flags)
    notes = list(launch.notes)
    dummy = _value(flags, "--load-format") == "dummy"
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
        return replace(launch, notes=tuple(notes))
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
        if dummy:
            flags = _without(flags, "--load-format")
            notes.append("--load-format dummy dropped: the real weights load")
    for flag, decimals in FRACTION_FLAGS.items():
        text = _value(flags, flag)
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
    return replace(launch, model=model or launch.model, flags=tuple(flags), notes=tuple(notes))


def _relative_path(model: str) -> bool:
    """A local path relative to the worker's folder: ``./m``, ``.nova/tiny-model``, ``~/m``, ``a/b/c``.
    A hub id (``Qwen/Qwen3-8B``: one slash, or ``gpt2``: none) and an absolute path are not."""
    if model.startswith("/"):
        return False
    return model.startswith((".", "~")) or model.count("/") > 1


def _image(engine_version: str | None, image: str | None) -> str:
    if image:
        return image
    version = (engine_version or "").split("+", 1)[0].strip()
    tag = f"v{version}" if re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", version) else "latest"
    return f"vllm/vllm-openai:{tag}"


def _header(launch: Launch) -> str:
    lines = [f"# nova-search: {launch.source}, engine {launch.engine_version or 'unknown'}"]
    lines += [f"# {n}" for n in launch.notes]
    lines.append("# the API key comes from VLLM_API_KEY (never in the command line)")
    return "\n".join(lines) + "\n"


def _in_container(launch: Launch) -> tuple[str | None, list[str], str | None]:
    """(model as the container sees it, flags, the host folder to mount) for a local model path."""
    model = launch.model
    if model and model.startswith("/"):
        return f"{MODEL_MOUNT}/{PurePosixPath(model).name}", list(launch.flags), model
    return model, list(launch.flags), None


def render(
    launch: Launch, fmt: str, *, name: str = "vllm", image: str | None = None, port: int = 8000
) -> str:
    """``launch`` in format ``fmt`` (``EXPORT_FORMATS``), with a header saying where it came from."""
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"--format {fmt!r}: valid: {', '.join(EXPORT_FORMATS)}")
    if fmt == "vllm":
        return _header(launch) + shlex.join(launch.argv) + "\n"
    model, flags, host_dir = _in_container(launch)
    args = (["--model", model] if model else []) + flags
    img = _image(launch.engine_version, image)
    doc: Any = _compose(name, img, args, port, launch.gpus, host_dir) if fmt == "compose" else None
    if fmt == "compose":
        return _header(launch) + yaml.safe_dump(doc, sort_keys=False, width=1000)
    docs = _k8s(name, img, args, port, launch.gpus, host_dir is not None)
    return _header(launch) + yaml.safe_dump_all(docs, sort_keys=False, width=1000)


def _compose(
    name: str, img: str, args: list[str], port: int, gpus: int, host_dir: str | None
) -> dict[str, Any]:
    service: dict[str, Any] = {
        "image": img,
        "command": ["--host", "0.0.0.0", "--port", "8000", *args],
        "ports": [f"127.0.0.1:{port}:8000"],
        "environment": {"VLLM_API_KEY": "${VLLM_API_KEY:?set an API key}"},
        "shm_size": "16gb",
        "security_opt": ["no-new-privileges:true"],
        "cap_drop": ["ALL"],
        "deploy": {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": gpus, "capabilities": ["gpu"]}]}
            }
        },
    }
    if host_dir:
        service["volumes"] = [f"{host_dir}:{MODEL_MOUNT}/{PurePosixPath(host_dir).name}:ro"]
    return {"services": {name: service}}


def _k8s(
    name: str, img: str, args: list[str], port: int, gpus: int, local_model: bool
) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "nova-search"}
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    model_mount = MODEL_MOUNT if local_model else "/root/.cache/huggingface"
    mounts.append({"name": "model", "mountPath": model_mount, "readOnly": local_model})
    volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": f"{name}-model"}})
    container = {
        "name": name,
        "image": img,
        "args": ["--host", "0.0.0.0", "--port", "8000", *args],
        "env": [
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": f"{name}-api-key", "key": "api-key"}},
            }
        ],
        "ports": [{"containerPort": 8000, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 90,
        },
        "resources": {
            "requests": {"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": gpus},
            "limits": {"memory": f"{64 * gpus}Gi", "nvidia.com/gpu": gpus},
        },
        "volumeMounts": mounts,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }
    return [service, deployment]


def export_launch(
    trial: TrialResult,
    fmt: str,
    *,
    model: str | None = None,
    as_measured: bool = False,
    name: str = "vllm",
    image: str | None = None,
    port: int = 8000,
) -> str:
    """One trial's configuration in ``fmt``, made deployable (``deployable``)."""
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"--format {fmt!r}: valid: {', '.join(EXPORT_FORMATS)}")
    launch = deployable(launch_of_trial(trial), model=model, as_measured=as_measured)
    return render(launch, fmt, name=name, image=image, port=port)
