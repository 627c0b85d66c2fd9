"""A measured configuration, ready to deploy: ``vllm serve`` command, docker compose, Kubernetes.

What to deploy is a ``Launch``: the engine flags a trial ran (host, port and nova's own launcher
removed), where they came from and the device they were measured on (``device_of``: the spec's
``engine.device``). ``launch_of_trial`` takes one trial; ``launch_of_policy`` takes what the study's
deployment policy recommends (the one answer ``policy`` gives, see ``results.verdict``).

``deployable(launch, model=..., device=...)`` refuses what a study may run but a deployment must not:
random weights (``--load-format dummy``), a model path relative to the worker's folder, and a device
other than the one measured (a CPU study says nothing about a GPU: its flags, ``--gpu-memory-utilization``
as a share of host memory and ``--enforce-eager``, and its numbers are the CPU's). ``--model`` (the
real path or hub id) fixes the first two: it replaces the model and the served name, and drops the
dummy load format. Memory fractions are rounded down to two decimals (never more memory than was
measured). Every change is said in the output's header. ``as_measured=True`` exports the flags
verbatim, with a warning (the device is still checked).

Formats (``render``), each for the launch's device (``cpu``: vLLM's CPU image, no GPU):

- ``vllm``: ``vllm serve MODEL FLAGS`` (shell-quoted), the API key from ``VLLM_API_KEY``.
- ``compose``: one service on ``vllm/vllm-openai`` (tagged with the engine version the trial measured),
  the API key from the environment, the port, ``shm_size`` for ``/dev/shm`` (not ``ipc: host``: the
  container keeps its own IPC namespace), a ``/health`` healthcheck, the Hugging Face cache as a named
  volume, the model folder mounted read-only, GPUs.
- ``k8s``: a PersistentVolumeClaim for the model (or the Hugging Face cache), a Service and a
  Deployment: the API key from a Secret that the header's command creates (never written in the
  file), volumes for the model and ``/dev/shm``, GPU and CPU/memory requests, readiness and startup
  probes, no privilege escalation, every capability dropped, the runtime's default seccomp profile.

YAML is written without anchors and aliases (``_Dumper``): each document reads on its own.
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

from nova_search import redact
from nova_search.analysis.verdict import Verdict
from nova_search.engine.command import API_SERVER_MODULE, deployable_argv
from nova_search.errors import InputError, NothingQualifies, SpecError
from nova_search.results.trials import StudyResults, TrialResult

EXPORT_FORMATS: tuple[str, ...] = ("vllm", "compose", "k8s")
#: where the k8s and compose exports mount the model folder in the container
MODEL_MOUNT = "/models"
#: flags whose value is a fraction, rounded down to this many decimals for deployment
FRACTION_FLAGS = {"--gpu-memory-utilization": 2}
#: the devices a study measures on (the spec's ``engine.device``) and an export targets
DEVICES: tuple[str, ...] = ("cuda", "cpu")
#: vLLM's published images per device (the CPU build is not on Docker Hub)
IMAGES = {"cuda": "vllm/vllm-openai", "cpu": "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo"}
#: where vLLM's images keep the Hugging Face cache (they run as root)
HF_CACHE = "/root/.cache/huggingface"
#: the size the k8s export asks for the model's volume claim (the header says to adjust it)
MODEL_CLAIM_SIZE = "100Gi"
#: Kubernetes object names (a DNS-1123 label: the Service's name is one)
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper without anchors: a dict used twice (the labels) is written twice."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


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


def _with_value(flags: list[str], flag: str, value: str) -> list[str]:
    """``flags`` with ``flag``'s value replaced where it stands (``--flag V`` or ``--flag=V``)."""
    out = list(flags)
    for i, a in enumerate(out):
        if a == flag and i + 1 < len(out):
            out[i + 1] = value
        elif a.startswith(flag + "="):
            out[i] = f"{flag}={value}"
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
    payload = _value(flags, "--speculative-config")
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
        *_without(flags, "--speculative-config"),
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
        served = _value(flags, "--served-model-name")
        if served is not None and served != model:
            # the measured name belongs to the measured model: clients ask for the one deployed
            flags = _with_value(flags, "--served-model-name", model)
            notes.append(f"--served-model-name {model} (the study served {served})")
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
    return replace(launch, model=model or launch.model, flags=tuple(flags), notes=tuple(notes), device=target)


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


def _image(engine_version: str | None, image: str | None, device: str | None = None) -> str:
    if image:
        return image
    version = (engine_version or "").split("+", 1)[0].strip()
    tag = f"v{version}" if re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", version) else "latest"
    return f"{IMAGES[device or 'cuda']}:{tag}"


def _header(launch: Launch, *, deploy: tuple[str, ...] = ()) -> str:
    """The comment lines above an export. Every line goes through ``redact.one_line``: a newline (or
    any control character) in a model path, the engine's reported version or a note is written
    escaped, ``\\n``, so it can never end the comment and start a shell command or a YAML document."""
    device = launch.device or "cuda"
    lines = [f"nova-search: {launch.source}, engine {launch.engine_version or 'unknown'} on {device}"]
    lines += list(launch.notes)
    lines.append("the API key comes from VLLM_API_KEY (never in the command line)")
    lines += list(deploy)
    return "".join(f"# {redact.one_line(line)}\n" for line in lines)


def _dump(docs: list[Any]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=1000)


def _in_container(launch: Launch) -> tuple[str | None, list[str], str | None]:
    """(model as the container sees it, flags, the host folder to mount) for a local model path."""
    model = launch.model
    if model and model.startswith("/"):
        base = PurePosixPath(model).name
        if base in ("", ".", ".."):
            raise SpecError(
                f"--model: {redact.one_line(model)!r} names no folder to mount (it ends in '/', '.' or "
                "'..'); give the model folder's own path"
            )
        return f"{MODEL_MOUNT}/{base}", list(launch.flags), model
    return model, list(launch.flags), None


def render(
    launch: Launch, fmt: str, *, name: str = "vllm", image: str | None = None, port: int = 8000
) -> str:
    """``launch`` in format ``fmt`` (``EXPORT_FORMATS``) for its device, with a header saying where it
    came from and (k8s) what to create before applying it. Raises SpecError naming ``--format`` or
    ``--name`` (compose and k8s: a DNS-1123 label, the Service's name)."""
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"--format {fmt!r}: valid: {', '.join(EXPORT_FORMATS)}")
    if fmt == "vllm":
        # shlex.join quotes every word (a newline stays inside its quotes, never a new command)
        return _header(launch) + shlex.join(launch.argv) + "\n"
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"--name {name!r}: lower-case letters, digits and '-', starting and ending with a letter or "
            "digit, at most 63 characters (a Kubernetes name)"
        )
    model, flags, host_dir = _in_container(launch)
    args = (["--model", model] if model else []) + flags
    img = _image(launch.engine_version, image, launch.device)
    gpus = launch.gpus if launch.device != "cpu" else 0
    if fmt == "compose":
        # compose interpolates ${VAR} and $VAR in every value: a '$' of a path or flag is written '$$'
        compose_args = [a.replace("$", "$$") for a in args]
        return _header(launch) + _dump([_compose(name, img, compose_args, port, gpus, host_dir)])
    claim = f"{name}-model"
    if host_dir:
        held = (
            f"the model: copy {host_dir} into the claim as /{PurePosixPath(host_dir).name} "
            f"(the pod reads it at {MODEL_MOUNT}, read-only)"
        )
    else:
        held = f"the Hugging Face cache ({HF_CACHE}): the first start downloads {model} into it"
    deploy = (
        "before `kubectl apply -f`, create the API key's Secret (it is not in this file, so that applying",
        "the file again never replaces the key):",
        f'  kubectl create secret generic {name}-api-key --from-literal=api-key="$VLLM_API_KEY"',
        f"for a gated model, the token too (optional): kubectl create secret generic {name}-hf-token "
        '--from-literal=token="$HF_TOKEN"',
        f"this file creates the PersistentVolumeClaim {claim} ({MODEL_CLAIM_SIZE}, the cluster's default "
        f"storage class: adjust both) for {held}",
    )
    # Kubernetes expands $(VAR) in a container's args (the API key's variable among them): '$$(' keeps
    # a '$(' of a path or flag literal
    docs = _k8s(name, img, [a.replace("$(", "$$(") for a in args], port, gpus, host_dir is not None)
    return _header(launch, deploy=deploy) + _dump(docs)


def _compose(
    name: str, img: str, args: list[str], port: int, gpus: int, host_dir: str | None
) -> dict[str, Any]:
    service: dict[str, Any] = {
        "image": img,
        "command": ["--host", "0.0.0.0", "--port", "8000", *args],
        "ports": [f"127.0.0.1:{port}:8000"],
        "environment": {"VLLM_API_KEY": "${VLLM_API_KEY:?set an API key}", "HF_TOKEN": "${HF_TOKEN:-}"},
        # its own /dev/shm, sized, rather than ipc: host (the host's IPC namespace)
        "shm_size": "16gb",
        "security_opt": ["no-new-privileges:true"],
        "cap_drop": ["ALL"],
        # the images have python, not always curl; the start period covers a first download
        "healthcheck": {
            "test": [
                "CMD",
                "python3",
                "-c",
                "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=5)",
            ],
            "interval": "10s",
            "timeout": "10s",
            "retries": 3,
            "start_period": "15m",
        },
        "volumes": [f"huggingface:{HF_CACHE}"],
    }
    if gpus:
        service["deploy"] = {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": gpus, "capabilities": ["gpu"]}]}
            }
        }
    if host_dir:
        # the long syntax: a ':' in the host path cannot add a mount or change its options
        service["volumes"].append(
            {
                "type": "bind",
                "source": host_dir.replace("$", "$$"),
                "target": f"{MODEL_MOUNT}/{PurePosixPath(host_dir).name}".replace("$", "$$"),
                "read_only": True,
            }
        )
    return {"services": {name: service}, "volumes": {"huggingface": {}}}


def _k8s(
    name: str, img: str, args: list[str], port: int, gpus: int, local_model: bool
) -> list[dict[str, Any]]:
    """A PersistentVolumeClaim for the model, a Service and a Deployment; ``gpus`` 0: a CPU pod."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "nova-search"}
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    model_mount = MODEL_MOUNT if local_model else HF_CACHE
    mounts.append({"name": "model", "mountPath": model_mount, "readOnly": local_model})
    volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": f"{name}-model"}})
    units = max(gpus, 1)
    requests: dict[str, Any] = {"cpu": str(4 * units), "memory": f"{32 * units}Gi"}
    limits: dict[str, Any] = {"memory": f"{64 * units}Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = gpus
    container = {
        "name": name,
        "image": img,
        "args": ["--host", "0.0.0.0", "--port", "8000", *args],
        "env": [
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": f"{name}-api-key", "key": "api-key"}},
            },
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": f"{name}-hf-token", "key": "token", "optional": True}},
            },
        ],
        "ports": [{"containerPort": 8000, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 90,
        },
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": mounts,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{name}-model", "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": MODEL_CLAIM_SIZE}}},
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
            # one pod holds the ReadWriteOnce claim: the old pod goes before the new one starts
            "strategy": {"type": "Recreate"},
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
    return [claim, service, deployment]


def export_launch(
    trial: TrialResult,
    fmt: str,
    *,
    model: str | None = None,
    as_measured: bool = False,
    name: str = "vllm",
    image: str | None = None,
    port: int = 8000,
    measured_on: str | None = None,
    device: str | None = None,
) -> str:
    """One trial's configuration in ``fmt``, made deployable (``deployable``): measured on
    ``measured_on``, deployed on ``device``."""
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"--format {fmt!r}: valid: {', '.join(EXPORT_FORMATS)}")
    launch = deployable(
        launch_of_trial(trial, device=measured_on), model=model, as_measured=as_measured, device=device
    )
    return render(launch, fmt, name=name, image=image, port=port)
