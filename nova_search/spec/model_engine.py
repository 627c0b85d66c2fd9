"""The model and the engine: where vLLM is, how it is launched, what every trial passes it."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    create_model,
    field_validator,
    model_validator,
)

from nova_search import redact
from nova_search.knobs import SPACE_KNOBS, Knob
from nova_search.spec._base import StrictModel, as_cores

# ---------------------------------------------------------------- model, engine


class ModelSpec(StrictModel):
    #: a local model folder or a hub id; relative paths are resolved against the working directory
    path: str
    #: the name the server answers to (``--served-model-name``); defaults to ``path``
    served_name: str | None = None
    #: vocabulary size for synthetic token prompts; read from ``path/config.json`` when left out
    vocab_size: int | None = Field(default=None, gt=10, le=10_000_000)

    @model_validator(mode="after")
    def _one_line(self) -> ModelSpec:
        for field in ("path", "served_name"):
            problem = _control_problem(field, getattr(self, field))
            if problem:
                raise ValueError(problem)
        if redact.url_secrets(self.path):
            raise ValueError(
                "path holds a URL with a password or a secret query parameter, which would be stored with "
                "the study and shown in ps and exports: give the credentials to the server through "
                "engine.env ('NAME: ${NAME}', set in each worker's environment)"
            )
        return self


def _kind(value: Any) -> str:
    """What a YAML value is, in words: ``a number``, ``a boolean``, ``a list``..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "an empty value"
    return {"list": "a list", "dict": "a mapping"}.get(type(value).__name__, type(value).__name__)


def _control_problem(field: str, value: str | None) -> str | None:
    """``FIELD holds a control character`` for a value that goes into argv, an export and its comments
    (a newline there would start a new line of shell or YAML), or None. Never quotes the value."""
    c = redact.control_character(value or "")
    if c is None:
        return None
    return (
        f"{field} holds a control character ({c}): a path, name or command word is one line (it goes "
        "into the server's argv and into exports)"
    )


def _fixed_field(k: Knob) -> tuple[Any, Any]:
    bounds = {b: getattr(k, b) for b in ("gt", "ge", "le") if getattr(k, b) is not None}
    if k.type is int:
        bounds = {b: int(v) for b, v in bounds.items()}
    return (k.type | None, Field(default=None, description=k.help, **bounds))


class _FixedKnobs(StrictModel):
    """Checks every value given against its knob (``Knob.check``: a text that reads as a flag or holds a
    control character is refused; numbers have their bounds on the fields)."""

    @model_validator(mode="after")
    def _values(self) -> Any:
        for name, k in SPACE_KNOBS.items():
            value = getattr(self, name)
            problem = k.check(value) if value is not None else None
            if problem:
                raise ValueError(f"{name}: {problem}")
        return self


#: Knobs the machine needs even for the stock baseline (for example host-memory share on a CPU), and
#: the shape of a ``tuned`` configuration: the knob table's knobs, fixed values only.
EngineDefaults = create_model(  # type: ignore[call-overload]
    "EngineDefaults",
    __base__=_FixedKnobs,
    __doc__="Fixed knob values (the knob table's knobs): engine.defaults and tuned.",
    **{name: _fixed_field(k) for name, k in SPACE_KNOBS.items()},
)


#: engine.env names whose values must not be written into a spec (it is stored with the study)
SECRET_NAME = redact.SECRET_NAME
#: flags nova sets per trial (``--config``: nova's API key file; a config file of the user's could set
#: any flag, these included)
GUARDED_FLAGS = ("--api-key", "--port", "--host", "--config")
#: nova's own flags beside them, and why extra_args may not set them (vLLM takes the last value given,
#: so a flag in extra_args would quietly replace nova's): what the server is called and serves, where it
#: listens, and how many GPUs it takes (the worker hands each trial its GPU group by
#: tensor_parallel_size; a server that took more would share a GPU with another trial)
OWN_FLAGS: dict[str, str] = {
    "--model": "nova-search passes model.path",
    "--served-model-name": "nova-search passes model.served_name, the name its requests ask for",
    "--uds": "nova-search reaches the server at engine.host and a port it picks",
    "--tensor-parallel-size": "set engine.tensor_parallel_size (or search space.tensor_parallel_size): "
    "the worker gives each trial that many GPUs",
    "--pipeline-parallel-size": "the worker gives each trial engine.tensor_parallel_size GPUs, no more",
    "--data-parallel-size": "the worker gives each trial engine.tensor_parallel_size GPUs, no more",
    "--data-parallel-size-local": "the worker gives each trial engine.tensor_parallel_size GPUs, no more",
    "--decode-context-parallel-size": "the worker gives each trial engine.tensor_parallel_size GPUs",
    "--prefill-context-parallel-size": "the worker gives each trial engine.tensor_parallel_size GPUs",
    "--device-ids": "the worker picks each trial's GPUs (CUDA_VISIBLE_DEVICES)",
}
#: vLLM's one-dash spellings of OWN_FLAGS (argparse also takes a one-dash prefix: -t for -tp)
OWN_SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
}
#: engine.env names nova sets or that would move the server off what nova accounts for: which GPUs it
#: sees (the worker's placement), where it listens, what code every process of it loads
OWN_ENV: dict[str, str] = {
    "VLLM_API_KEY": "nova-search sets a fresh API key per trial",
    "CUDA_VISIBLE_DEVICES": "the worker gives each trial its GPUs (--gpus, tensor_parallel_size)",
    "NVIDIA_VISIBLE_DEVICES": "the worker gives each trial its GPUs (--gpus, tensor_parallel_size)",
    "HIP_VISIBLE_DEVICES": "the worker gives each trial its GPUs (--gpus, tensor_parallel_size)",
    "ROCR_VISIBLE_DEVICES": "the worker gives each trial its GPUs (--gpus, tensor_parallel_size)",
    "CUDA_DEVICE_ORDER": "the worker's GPU ids are nova-search's (PCI bus order), as nvidia-smi numbers them",
    "VLLM_HOST_IP": "nova-search reaches the server at engine.host",
    "VLLM_PORT": "nova-search picks the server's ports",
    "LD_PRELOAD": "a library loaded into every process of the server is not a setting to tune; set it "
    "in the worker's own environment if the machine needs it",
    "LD_AUDIT": "a library loaded into every process of the server is not a setting to tune",
    "NOVA_ENGINE_MARK": "nova-search marks each server's processes with it, to find them at teardown",
}


def exact_own_flag(word: str) -> str | None:
    """The nova-owned flag ``word`` is, written in full (``--served_model_name=x``, ``-tp``), or None.
    For ``engine.command``, whose words may be another program's (docker's ``-t``, ``--device``):
    abbreviations are not read there; ``--config`` is left out (docker's own)."""
    name = word.split("=", 1)[0]
    if name.startswith("--"):
        long = redact.normalise_flag(name)
        return long if long in (*GUARDED_FLAGS, *OWN_FLAGS) and long != "--config" else None
    return OWN_SHORT_FLAGS.get(name)


def own_flag(arg: str) -> str | None:
    """The nova-owned flag (``GUARDED_FLAGS``, ``OWN_FLAGS``, ``OWN_SHORT_FLAGS``, written long) that
    ``arg`` sets as vLLM reads it (any spelling, ``=value``, an abbreviation), or None."""
    if arg.startswith("--"):
        return next((f for f in (*GUARDED_FLAGS, *OWN_FLAGS) if redact.matches_flag(arg, f)), None)
    name = arg.split("=", 1)[0]
    if arg.startswith("-") and len(name) >= 2:
        # argparse reads a one-dash word as a known short flag or an unambiguous prefix of one
        return next((long for short, long in OWN_SHORT_FLAGS.items() if short.startswith(name)), None)
    return None


#: values that switch something on or off, never a secret (HF_HUB_DISABLE_IMPLICIT_TOKEN: "1")
_SWITCHES = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off"})
#: a value that is one ``${NAME}`` reference and nothing else
_ONE_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


class EngineSpec(StrictModel):
    #: an interpreter that has vLLM; runs ``python -m vllm.entrypoints.openai.api_server``.
    #: ``NOVA_ENGINE_PYTHON`` overrides it.
    python: str | None = None
    #: an argv prefix for images that ship the CLI, e.g. ``[vllm, serve]`` (the model is appended)
    command: list[str] | None = None
    #: ``cuda`` or ``cpu`` (vLLM's CPU build: device memory is host memory)
    device: Literal["cuda", "cpu"] = "cuda"
    #: the address servers bind to: loopback unless a node must be reached from elsewhere
    host: str = "127.0.0.1"
    #: GPUs one server shards the model over, unless the space searches it (space.tensor_parallel_size);
    #: a worker runs one trial per group of this many GPUs
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    #: extra environment for every server; ``${NAME}`` / ``${NAME:-default}`` is read from the worker's
    #: environment at launch (secrets go that way: the spec is stored with the study; a literal value
    #: under a secret's name, DB_PASS or HF_TOKEN, or a URL with a password is refused). The server
    #: inherits nothing else of the worker's environment but PATH, locale, CUDA/NCCL/HF/VLLM/TORCH/...
    #: Not what nova sets or accounts for: VLLM_API_KEY, CUDA_VISIBLE_DEVICES (and NVIDIA_/HIP_/ROCR_),
    #: CUDA_DEVICE_ORDER, VLLM_HOST_IP, VLLM_PORT, LD_PRELOAD, LD_AUDIT; one line each (no control
    #: character)
    env: dict[str, str] = Field(default_factory=dict)
    #: flags passed to every trial's server, after the knobs; not --api-key, --host, --port or --config
    #: (nova sets them per trial), not --model, --served-model-name or --uds (what nova serves and
    #: reaches), not --tensor-parallel-size/-tp, -pp, -dp, --device-ids (the worker gives each trial its
    #: GPUs), not a --hf-token value (use env HF_TOKEN), in any spelling vLLM reads; no control character
    extra_args: list[str] = Field(default_factory=list)
    #: CPU cores the server is pinned to (its children inherit it): a list, or a taskset-style string
    #: such as ``0-7``. On a small CPU machine keep the
    #: engine and the load generator (sweep.client_cpus) on different cores, or both measure noise.
    cpus: list[Annotated[int, Field(ge=0, le=65535)]] | None = Field(default=None, min_length=1)
    #: knob values every trial gets, the stock baseline included, unless the space sets them (what the
    #: machine needs: on a CPU, gpu_memory_utilization)
    defaults: EngineDefaults = Field(default_factory=EngineDefaults)
    #: which batch sizes vLLM captures CUDA graphs for. ``sweep``: up to the largest batch the sweep
    #: makes (its highest concurrency x (1 + speculative tokens), at most vLLM's own 512), the same for
    #: every trial of a drafter length, so vLLM's compile cache (whose key holds the sizes) is reused
    #: across trials that differ in max_num_seqs. ``vllm``: vLLM's own sizes, which follow max_num_seqs.
    #: A max_cudagraph_capture_size given in the space, engine.defaults or tuned wins; not on the CPU.
    cuda_graphs: Literal["sweep", "vllm"] = "sweep"
    #: seconds a server may take to answer /health before the trial ends FAIL (timeout)
    boot_timeout_s: float = Field(default=900.0, gt=0, le=86_400)
    #: seconds between SIGTERM and SIGKILL when a server is stopped
    stop_timeout_s: float = Field(default=20.0, gt=0, le=3600)

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, v: Any) -> Any:
        return as_cores(v)  # 0-7, "0,2,4-7" or [0, 1], as sweep.client_cpus takes them

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        """env values, extra_args and command words must be text: refused here, naming the place but
        not the value (a validation error echoes what it got, and these may hold a secret)."""
        if not isinstance(data, dict):
            return data
        env = data.get("env")
        if isinstance(env, dict):
            for key, value in env.items():
                if not isinstance(value, str):
                    raise ValueError(
                        f"env.{key}: a string is expected, not {_kind(value)} (quote it in YAML: an "
                        "unquoted 123456 or true is read as a number or a boolean)"
                    )
        for field in ("extra_args", "command"):
            words = data.get(field)
            if isinstance(words, list):
                for i, word in enumerate(words):
                    if not isinstance(word, str):
                        raise ValueError(
                            f"{field}.{i}: a string is expected, not {_kind(word)} (quote it in YAML)"
                        )
        return data

    @model_validator(mode="after")
    def _check(self) -> EngineSpec:
        if self.python is not None and self.command is not None:
            raise ValueError("give engine.python or engine.command, not both")
        if self.command is not None and not self.command:
            raise ValueError("engine.command must not be empty")
        if "tensor_parallel_size" in self.model_fields_set and self.defaults.tensor_parallel_size is not None:
            raise ValueError(
                "give engine.tensor_parallel_size or engine.defaults.tensor_parallel_size, not both "
                "(they are the same setting)"
            )
        for field, value in (
            ("python", self.python),
            ("host", self.host),
            *((f"command.{i}", word) for i, word in enumerate(self.command or ())),
        ):
            problem = _control_problem(field, value)
            if problem:
                raise ValueError(problem)
        for i, word in enumerate(self.command or ()):
            flag = exact_own_flag(word) if i > 0 else None
            if flag is not None:
                spelt = word.split("=", 1)[0]
                said = flag if spelt == flag else spelt
                raise ValueError(
                    f"command.{i}: {said} is nova-search's to set ({flag}: "
                    f"{OWN_FLAGS.get(flag, 'it sets it per trial')}); engine.command is the launcher "
                    "before the model (e.g. [vllm, serve])"
                )
            if redact.word_secrets(word):
                raise ValueError(
                    f"command.{i}: a URL with a password, a secret query parameter or a NAME=secret "
                    "(docker run -e HF_TOKEN=...), which would be stored with the study and shown in ps: "
                    "set it in engine.env as 'NAME: ${NAME}' (or pass the name alone, -e NAME, to docker)"
                )
        problem = extra_args_problem(self.extra_args)
        if problem:
            raise ValueError(problem)
        for key in self.env:
            if key in OWN_ENV:
                raise ValueError(f"env.{key}: engine.env must not set {key}: {OWN_ENV[key]}")
        for key, value in self.env.items():
            problem = env_problem(key, value)
            if problem:
                raise ValueError(problem)
        return self

    def resolved_python(self) -> str | None:
        """``NOVA_ENGINE_PYTHON`` wins over the spec, so one spec runs on any machine."""
        if self.command is not None:
            return None
        return os.environ.get("NOVA_ENGINE_PYTHON") or self.python


def extra_args_problem(args: list[str]) -> str | None:
    """Why ``engine.extra_args`` cannot be run as given, or None. Flags are read as vLLM reads them:
    ``_`` for ``-``, ``--flag=value``, and argparse's abbreviations (``--api-ke`` is ``--api-key``).
    Never quotes a secret."""
    for i, arg in enumerate(args):
        problem = _control_problem(f"extra_args.{i}", arg)
        if problem:
            return problem
        flag = own_flag(arg)
        if flag == "--config":
            return (
                f"extra_args.{i}: {flag} is refused: nova-search passes the trial's API key in its own "
                "--config file, and a config file of yours could set any flag (the API key, host and port "
                "included); give its flags in extra_args"
            )
        if flag in OWN_FLAGS:
            spelt = arg.split("=", 1)[0]
            said = flag if spelt == flag else f"{flag} (as {spelt})"
            return f"extra_args.{i}: extra_args must not set {said}: {OWN_FLAGS[flag]}"
        if flag is not None:
            return f"extra_args.{i}: extra_args must not set {flag}: nova-search sets it per trial"
        if redact.secret_flag(arg) == "--hf-token" and redact.argv_secrets(args[i : i + 2]):
            return (
                f"extra_args.{i}: --hf-token with a value puts the token in the server's argv (ps, the "
                "stored spec and argv, dump, exports): remove it and set engine.env.HF_TOKEN: "
                "'${HF_TOKEN}' (vLLM reads HF_TOKEN from its environment), with HF_TOKEN in each "
                "worker's environment"
            )
        if redact.word_secrets(arg):
            return (
                f"extra_args.{i}: a URL with a password (or a token as its user name), a secret query "
                "parameter or a NAME=secret, which would be stored with the study and shown in ps: give "
                "it to the server through engine.env instead ('NAME: ${NAME}', NAME set in each worker's "
                "environment), where vLLM reads it from its environment"
            )
    return None


def env_problem(key: str, value: str) -> str | None:
    """Why ``engine.env.KEY: VALUE`` must not be written in a spec, or None: a secret by its name
    (``redact.secret_name``: not one ``${NAME}`` reference) or by what it holds (a URL with a password,
    a secret query parameter), or a reference to one of nova's own variables (``${NOVA_STORAGE}``
    holds the database's password: the server never gets nova's environment). Never quotes the
    value."""
    for m in redact.REFERENCE.finditer(value):
        if m.group(1).startswith("NOVA_"):
            return (
                f"env.{key}: ${{{m.group(1)}}} is nova-search's own variable (NOVA_STORAGE holds the "
                "database's password): a server never gets nova's environment"
            )
    if redact.secret_name(key) and not _ONE_REFERENCE.fullmatch(value) and value.lower() not in _SWITCHES:
        return (
            f"env.{key} looks like a secret, and the spec is stored with the study (dump, "
            f"dashboard): write it as '${{{key}}}' and set {key} in each worker's environment"
        )
    if redact.url_secrets(value):
        return (
            f"env.{key} holds a URL with a password (or a token as its user name) or a secret query "
            "parameter, and the spec is stored with the study (dump, dashboard): write the secret part "
            f"as a reference, e.g. 'http://user:${{{key}_PASSWORD}}@host', or the whole value as "
            f"'${{{key}}}', and set it in each worker's environment"
        )
    return None
