"""EngineConfig -> the argv of a vLLM OpenAI server. argv lists only, never a shell string.

The config->flag mapping is the knob table (``knobs.KNOBS``): flags differ between vLLM
versions, and that is the one place to change them. Booleans become ``--x`` / ``--no-x``; the
speculative config is JSON.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nova_search import redact
from nova_search.engine.reaper import MARK_VAR
from nova_search.engine.sleep import SLEEP_FLAG, sleep_environment
from nova_search.errors import EngineError
from nova_search.knobs import KNOBS, EngineConfig
from nova_search.spec import EngineSpec, ModelSpec

#: EngineConfig field -> (flag, kind), in argv order (derived from the knob table)
FLAGS: dict[str, tuple[str, str]] = {k.name: (k.flag, k.kind) for k in KNOBS}

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"

#: what a server inherits from the worker's environment, by name or by prefix, and nothing else: never
#: nova's own variables (NOVA_STORAGE holds the database password), never a stray credential. The
#: spec's engine.env adds to it; ${NAME} there is read from the worker's environment at launch.
INHERITED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "TMP",
        "TEMP", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CC", "CXX", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
)  # fmt: skip
INHERITED_PREFIXES = (
    "LC_", "XDG_", "CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH", "PYTORCH_", "VLLM_", "HF_",
    "HUGGING_FACE_", "TRANSFORMERS_", "TRITON_", "OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "UCX_",
    "GLOO_", "CUBLAS_", "CUDNN_",
)  # fmt: skip
#: ``${NAME}`` or ``${NAME:-default}`` in an engine.env value
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def engine_environment(worker_env: Mapping[str, str], engine_env: Mapping[str, str]) -> dict[str, str]:
    """The server's whole environment: the inherited part of the worker's (``INHERITED_*``), then the
    spec's ``engine.env`` with ``${NAME}`` (or ``${NAME:-default}``) filled from the worker's
    environment. Raises EngineError naming the variable when a reference without a default is not
    set there."""
    env = {
        k: v
        for k, v in worker_env.items()
        if (k in INHERITED_NAMES or k.startswith(INHERITED_PREFIXES)) and k != "VLLM_API_KEY"
    }
    for key, value in engine_env.items():

        def fill(m: re.Match[str], key: str = key) -> str:
            name, default = m.group(1), m.group(2)
            if name not in worker_env and default is not None:
                return default
            if name not in worker_env:
                raise EngineError(
                    f"engine.env.{key}: ${{{name}}} is not set in this worker's environment (export {name})"
                )
            return worker_env[name]

        env[key] = _REFERENCE.sub(fill, value)
    return env


#: the shortest value masked as a secret: shorter ones ("1", "true", a port) would mask half a log, and
#: no token or password is that short
MIN_SECRET_CHARS = 6


def launch_secrets(
    worker_env: Mapping[str, str],
    engine_env: Mapping[str, str],
    env: Mapping[str, str],
    argv: tuple[str, ...] | list[str],
    api_key: str = "",
) -> tuple[str, ...]:
    """The values nova itself put into a server's environment (``env``, from ``engine_environment``)
    and ``argv`` that must not reach a stored log: every value of a variable whose name says it holds
    a secret (``HF_TOKEN``, inherited or set through ``${HF_TOKEN}``), every value expanded from the
    worker's environment by a ``${NAME}`` reference (nova cannot tell a token there from a path, and
    masks both), URL passwords and secret query values in the environment, secret flags' values in
    ``argv``, and the API key. Longest first; values shorter than MIN_SECRET_CHARS left out."""
    found: set[str] = {api_key}
    for key, value in env.items():
        if redact.secret_name(key):
            found.add(value)
        found.update(redact.url_secrets(value))
    for value in engine_env.values():
        for m in _REFERENCE.finditer(value):
            if m.group(1) in worker_env:
                found.add(worker_env[m.group(1)])
    found.update(redact.argv_secrets(argv))
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True))


def unresolved_references(engine_env: Mapping[str, str], worker_env: Mapping[str, str]) -> list[str]:
    """``engine.env.KEY: ${NAME}`` for every reference the worker's environment cannot fill."""
    return [
        f"engine.env.{k}: ${{{m.group(1)}}}"
        for k, v in engine_env.items()
        for m in _REFERENCE.finditer(v)
        if m.group(1) not in worker_env and m.group(2) is None
    ]


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What it takes to start one server: argv (no secrets in it) and its whole environment. The API
    key goes in a private file (``key_file``, named in argv by vLLM's ``--config``) that the server
    writes before the launch and deletes once the engine has read it."""

    argv: tuple[str, ...]
    env: dict[str, str]
    host: str
    port: int
    #: CPU cores to pin the server to (None: no pinning)
    cpus: tuple[int, ...] | None = None
    api_key: str = ""
    key_file: Path | None = None
    #: what nova put into the server's environment and argv that must never be stored or shown: the
    #: API key, the values it expanded from the worker's environment (``${NAME}``), the values of
    #: variables whose name says "secret" (an inherited HF_TOKEN), URL passwords, secret flags'
    #: values (``launch_secrets``). Masked in the server's log before any of it is stored.
    secret_values: tuple[str, ...] = ()
    #: this server's mark (``engine.reaper``): ``NOVA_ENGINE_MARK`` in its environment, inherited by
    #: every process it starts, so that teardown finds a child that left its process group
    mark: str = ""

    def key_config(self) -> str:
        """The key file's text: vLLM's ``--config`` YAML holding ``--api-key``."""
        return f"api-key: {json.dumps(self.api_key)}\n"


def new_api_key() -> str:
    """A fresh API key for one server: 48 hex digits. Never URL-safe base64: vLLM reads ``--config``
    by turning each entry into argv (``--api-key VALUE``), and argparse takes a value that starts with
    ``-`` for a flag, so one key in 64 made the server exit with code 2 at start-up."""
    return secrets.token_hex(24)


def config_args(config: EngineConfig) -> list[str]:
    """The flags for the knobs that are set, in the table's order."""
    args: list[str] = []
    for name, (flag, kind) in FLAGS.items():
        value: Any = getattr(config, name)
        if value is None:
            continue
        if kind == "bool":
            args.append(flag if value else "--no-" + flag.removeprefix("--"))
        elif kind == "json":
            args += [flag, json.dumps(value.as_json_dict(), separators=(",", ":"))]
        else:
            args += [flag, str(value)]
    return args


def engine_prefix(engine: EngineSpec, model: ModelSpec) -> list[str]:
    python = engine.resolved_python()
    if engine.command is not None:
        return [*engine.command, model.path]
    if python is None:
        raise EngineError(
            "engine.python is not set: give engine.python (an interpreter that has vLLM), "
            "engine.command (e.g. [vllm, serve]) or the NOVA_ENGINE_PYTHON environment variable"
        )
    return [python, "-m", API_SERVER_MODULE, "--model", model.path]


def build_launch(
    engine: EngineSpec,
    model: ModelSpec,
    config: EngineConfig,
    *,
    port: int,
    api_key: str,
    gpus: tuple[int, ...] = (),
    sleep_mode: bool = False,
    key_file: Path | None = None,
) -> LaunchPlan:
    """The full launch (``sleep_mode``: with vLLM's sleep mode, ``engine.sleep``). The API key travels
    in a private file read through vLLM's ``--config`` (``key_file``; by default a new name in the
    temporary folder), never in argv, so it shows neither in ``ps`` nor in the argv stored on the
    trial. Not in the environment either: vLLM hashes its known environment variables, VLLM_API_KEY
    among them, into the key of its compile cache, so a fresh key per trial in the environment would
    make every boot compile again. ``env`` is the server's whole environment
    (``engine_environment``): nothing else of the worker's reaches it."""
    if api_key.startswith("-"):
        raise EngineError(
            "api_key: a key that starts with '-' reads as a flag in vLLM's --config; use new_api_key()"
        )
    key_file = key_file or Path(tempfile.gettempdir()) / f"nova-key-{secrets.token_hex(8)}.yaml"
    argv = [
        *engine_prefix(engine, model),
        "--served-model-name",
        served_name(model),
        *config_args(config),
        *engine.extra_args,
        *([SLEEP_FLAG] if sleep_mode else []),
        "--config",
        str(key_file),
        "--host",
        engine.host,
        "--port",
        str(port),
    ]
    env = engine_environment(os.environ, engine.env)
    if sleep_mode:
        cores = len(engine.cpus) if engine.cpus else len(os.sched_getaffinity(0))
        env.update(sleep_environment(env, cores))
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    mark = secrets.token_hex(8)
    env[MARK_VAR] = mark
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        host=engine.host,
        port=port,
        cpus=tuple(engine.cpus) if engine.cpus else None,
        api_key=api_key,
        key_file=key_file,
        secret_values=launch_secrets(os.environ, engine.env, env, argv, api_key),
        mark=mark,
    )


def served_name(model: ModelSpec) -> str:
    return model.served_name or model.path


def deployable_argv(plan_argv: tuple[str, ...] | list[str]) -> list[str]:
    """The stored argv without the per-trial host and port: what a deployment would run. A secret in
    it (a ``--hf-token`` value, a URL's password: ``redact.argv_secrets``; the spec refuses them, an
    older study may hold one) is masked ``***``."""
    out: list[str] = []
    skip = False
    for a in plan_argv:
        if skip:
            skip = False
            continue
        if a in ("--host", "--port", "--config"):  # --config: the trial's API key file
            skip = True
            continue
        if a == SLEEP_FLAG:  # nova's own, for the leader it parks between windows
            continue
        out.append(a)
    return redact.mask_argv(out)
