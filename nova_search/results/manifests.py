"""A deployable launch written out (``render``), each format for the launch's device (``cpu``: vLLM's
CPU image, no GPU):

- ``vllm``: ``vllm serve MODEL FLAGS`` (shell-quoted), the API key from ``VLLM_API_KEY``.
- ``compose``: one service on ``vllm/vllm-openai`` (tagged with the engine version the trial measured),
  the API key from the environment, the port, ``shm_size`` for ``/dev/shm`` (not ``ipc: host``: the
  container keeps its own IPC namespace), a ``/health`` healthcheck, ``restart: unless-stopped`` (a
  server that crashes comes back), the Hugging Face cache as a named volume, the model folder mounted
  read-only, GPUs.
- ``k8s``: a PersistentVolumeClaim for the model (or the Hugging Face cache), a Service and a
  Deployment: the API key from a Secret that the header's command creates (never written in the
  file), volumes for the model and ``/dev/shm``, GPU and CPU/memory requests, readiness, startup and
  liveness probes (a server that stops answering ``/health`` is restarted once it has started), no
  privilege escalation, every capability dropped, the runtime's default seccomp profile.

Every output starts with a header saying where the launch came from and what was changed on the way.
YAML is written without anchors and aliases (``_Dumper``): each document reads on its own. What is
rendered is made safe first (``results.launch.deployable``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

import yaml

from nova_search import redact
from nova_search.errors import SpecError
from nova_search.results.launch import Launch

EXPORT_FORMATS: tuple[str, ...] = ("vllm", "compose", "k8s")
#: where the k8s and compose exports mount the model folder in the container
MODEL_MOUNT = "/models"
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
        # a server that crashes (an engine error, the OOM killer) comes back; `docker compose stop` stays
        "restart": "unless-stopped",
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
        # once started (the startup probe holds it off during loading), a server whose /health stops
        # answering for 2.5 minutes (a wedged engine) is restarted
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 5,
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
