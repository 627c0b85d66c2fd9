"""EngineConfig -> the argv of a vLLM OpenAI server. argv lists only, never a shell string.

The config->flag mapping is the knob table (``engine.config.KNOBS``): flags differ between vLLM
versions, and that is the one place to change them. Booleans become ``--x`` / ``--no-x``; the
speculative config is JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nova_search.engine.config import KNOBS, EngineConfig
from nova_search.errors import EngineError
from nova_search.spec import EngineSpec, ModelSpec

#: EngineConfig field -> (flag, kind), in argv order (derived from the knob table)
FLAGS: dict[str, tuple[str, str]] = {k.name: (k.flag, k.kind) for k in KNOBS}

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What it takes to start one server: argv (no secrets in it) and the environment to add."""

    argv: tuple[str, ...]
    env: dict[str, str]
    host: str
    port: int
    #: CPU cores to pin the server to (None: no pinning)
    cpus: tuple[int, ...] | None = None


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
) -> LaunchPlan:
    """The full launch. The API key travels in the environment (VLLM_API_KEY), never in argv, so it
    shows neither in ``ps`` nor in the argv stored on the trial."""
    argv = [
        *engine_prefix(engine, model),
        "--served-model-name",
        served_name(model),
        *config_args(config),
        *engine.extra_args,
        "--host",
        engine.host,
        "--port",
        str(port),
    ]
    env = dict(engine.env)
    env["VLLM_API_KEY"] = api_key
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        host=engine.host,
        port=port,
        cpus=tuple(engine.cpus) if engine.cpus else None,
    )


def served_name(model: ModelSpec) -> str:
    return model.served_name or model.path


def deployable_argv(plan_argv: tuple[str, ...] | list[str]) -> list[str]:
    """The stored argv without the per-trial host and port: what a deployment would run."""
    out: list[str] = []
    skip = False
    for a in plan_argv:
        if skip:
            skip = False
            continue
        if a in ("--host", "--port"):
            skip = True
            continue
        out.append(a)
    return out
