"""trial -> EngineConfig, and the compatibility table.

Parameters are sampled in a fixed order; ``num_speculative_tokens`` and the method's options exist only
when the method is not none (TPE's ``group=True`` handles the conditional space). A sampled config is
then checked against ``RULES``: a known-bad combination is never launched, the trial ends PRUNED with
the rule's reason. Rules are pure functions of the config and the host/model facts.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nova_search.engine.config import SPACE_KNOBS, EngineConfig, SpeculativeConfig
from nova_search.engine.memory import ModelShape, estimate
from nova_search.spec import (
    BoolChoices,
    FloatChoices,
    FloatRange,
    IntChoices,
    IntRange,
    StrChoices,
    StudySpec,
)


class Suggester(Protocol):
    """The part of ``optuna.Trial`` that sampling needs (a FixedTrial works too)."""

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int: ...
    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float: ...
    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Facts:
    """What the rules know about the machine and the model."""

    device: str = "cuda"
    cpu_flags: frozenset[str] = frozenset()
    model_max_len: int | None = None
    model_has_mtp: bool = False
    #: the accelerator's (or CPU's) name, recorded with every measurement
    device_name: str | None = None
    #: optional packages found in the engine's environment (ENGINE_PACKAGES); None: not known (an
    #: engine.command launcher, whose environment nova cannot look into), so no rule relies on it
    engine_packages: frozenset[str] | None = None
    #: the model's shape for the memory estimate (engine.memory); None: not one nova can size
    model_shape: ModelShape | None = None
    #: memory of one of the worker's GPUs (bytes); None: not known (no nvidia-smi, or the CPU build)
    device_memory_bytes: int | None = None
    #: the model's attention heads and KV heads (config.json; a multimodal model's text_config), which
    #: tensor parallelism shards; None: not known
    model_heads: int | None = None
    model_kv_heads: int | None = None
    #: the GPUs one trial may have on this worker (its slot, ``placement``); None: the worker was given
    #: no GPU set (``--gpus``), so nova does not know
    gpu_count: int | None = None


def _gpu_facts(gpus: tuple[int, ...]) -> tuple[str | None, int | None]:
    """The name and memory (bytes) of the worker's first GPU, from one nvidia-smi call; None for what
    it cannot say."""
    argv = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]
    if gpus:
        argv += ["-i", str(gpus[0])]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    lines = out.strip().splitlines()
    if not lines:
        return None, None
    name, _, mib = lines[0].rpartition(",")  # the name may hold a comma, the memory cannot
    try:
        return name.strip() or None, int(float(mib) * 1024 * 1024)
    except ValueError:
        return lines[0].strip() or None, None


#: optional packages some configurations need in the engine's environment (import names)
ENGINE_PACKAGES = ("arctic_inference",)


def engine_packages(python: str | None) -> frozenset[str] | None:
    """Which of ENGINE_PACKAGES the engine's interpreter can import (found, not imported), or None
    when there is no interpreter to ask or it cannot answer."""
    if not python:
        return None
    code = (
        "import importlib.util as u\n"
        f"print(' '.join(m for m in {ENGINE_PACKAGES!r} if u.find_spec(m) is not None))"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return frozenset(out.stdout.split())


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str | None, frozenset[str]] | None:
    """The host CPU's model name (None: not given) and flags, read at run time; None: unreadable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    m = re.search(r"^flags\s*:\s*(.*)$", text, flags=re.MULTILINE)
    flags = frozenset(m.group(1).split()) if m else frozenset()
    m = re.search(r"^model name\s*:\s*(.*)$", text, flags=re.MULTILINE)
    return (m.group(1).strip() if m else None), flags


def host_facts(spec: StudySpec, gpus: tuple[int, ...] = ()) -> Facts:
    cpu_name, flags = cpu_info() or (None, frozenset())
    on_gpu = spec.engine.device == "cuda"
    gpu_name, gpu_memory = _gpu_facts(gpus) if on_gpu else (None, None)
    device_name = gpu_name if on_gpu else cpu_name
    max_len, has_mtp, shape = None, False, None
    heads: tuple[int | None, int | None] = (None, None)
    try:
        cfg = json.loads((Path(spec.model.path) / "config.json").read_text())
        max_len = cfg.get("max_position_embeddings")
        has_mtp = bool(cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers"))
        shape = ModelShape.of(cfg) if isinstance(cfg, dict) else None
        heads = model_heads(cfg) if isinstance(cfg, dict) else heads
    except (OSError, ValueError):
        pass
    return Facts(
        device=spec.engine.device,
        cpu_flags=flags,
        model_max_len=max_len,
        model_has_mtp=has_mtp,
        device_name=device_name,
        engine_packages=engine_packages(spec.engine.resolved_python()),
        model_shape=shape if on_gpu else None,
        device_memory_bytes=gpu_memory,
        model_heads=heads[0],
        model_kv_heads=heads[1],
        gpu_count=len(gpus) if gpus else None,
    )


def model_heads(cfg: dict[str, Any]) -> tuple[int | None, int | None]:
    """(attention heads, KV heads) of a config.json (its text_config for a multimodal model); None for
    what it does not say. KV heads default to the attention heads (multi-head attention)."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}

    def positive(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    heads = positive(cfg.get("num_attention_heads"))
    return heads, positive(cfg.get("num_key_value_heads")) or heads


# ---------------------------------------------------------------- the compatibility table


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    #: returns the reason the config cannot run, or None
    check: Callable[[EngineConfig, Facts], str | None]


def _effective_max_len(c: EngineConfig, f: Facts) -> int | None:
    return c.max_model_len or f.model_max_len


def _chunked_prefill_budget(c: EngineConfig, f: Facts) -> str | None:
    max_len = _effective_max_len(c, f)
    if c.enable_chunked_prefill is False and c.max_num_batched_tokens is not None and max_len:
        if c.max_num_batched_tokens < max_len:
            return (
                f"without chunked prefill, max_num_batched_tokens ({c.max_num_batched_tokens}) must be "
                f">= max_model_len ({max_len}); vLLM refuses to start"
            )
    return None


def _fp8_kv_on_cpu(c: EngineConfig, f: Facts) -> str | None:
    if f.device == "cpu" and (c.kv_cache_dtype or "").startswith("fp8"):
        if not f.cpu_flags & {"avx512f", "amx_bf16", "amx_tile"}:
            return "FP8 KV cache on CPU requires x86 with AVX-512 or AMX; this CPU has neither"
    return None


def _ngram_window(c: EngineConfig, f: Facts) -> str | None:
    s = c.speculative
    if s and s.method == "ngram" and s.prompt_lookup_min and s.prompt_lookup_max:
        if s.prompt_lookup_min > s.prompt_lookup_max:
            return (
                f"ngram prompt_lookup_min ({s.prompt_lookup_min}) > prompt_lookup_max ({s.prompt_lookup_max})"
            )
    return None


def _mtp_needs_heads(c: EngineConfig, f: Facts) -> str | None:
    if c.speculative and c.speculative.method == "mtp" and not f.model_has_mtp:
        return "mtp speculation needs a model with MTP heads; this model's config.json has none"
    return None


def _dflash_backend(c: EngineConfig, f: Facts) -> str | None:
    if c.speculative and c.speculative.method == "dflash":
        if c.attention_backend not in (None, "TRITON_ATTN", "triton_attn"):
            return f"dflash needs the Triton attention backend (got {c.attention_backend})"
    return None


def _suffix_needs_arctic(c: EngineConfig, f: Facts) -> str | None:
    if c.speculative and c.speculative.method == "suffix" and f.engine_packages is not None:
        if "arctic_inference" not in f.engine_packages:
            return (
                "suffix decoding needs the arctic-inference package in the engine's environment "
                "(pip install arctic-inference there); it is not installed"
            )
    return None


def _tp_divides_heads(c: EngineConfig, f: Facts) -> str | None:
    """vLLM shards attention heads over the tensor-parallel GPUs: the heads must divide by TP, and the
    KV heads either divide by it or (fewer KV heads than GPUs) divide it, each then replicated."""
    tp = c.gpus
    if tp == 1:
        return None
    if f.model_heads is not None and f.model_heads % tp:
        return (
            f"tensor_parallel_size {tp} does not divide the model's {f.model_heads} attention heads; "
            "vLLM refuses to start"
        )
    kv = f.model_kv_heads
    if kv is not None and (kv % tp if kv >= tp else tp % kv):
        return (
            f"tensor_parallel_size {tp} and the model's {kv} KV heads: vLLM needs the KV heads to divide "
            "by it, or it to divide by them"
        )
    return None


def _tp_fits_gpus(c: EngineConfig, f: Facts) -> str | None:
    if f.gpu_count is not None and c.gpus > f.gpu_count:
        return (
            f"tensor_parallel_size {c.gpus} needs {c.gpus} GPUs; a trial on this worker has "
            f"{f.gpu_count} (--gpus)"
        )
    return None


def _memory_fits(c: EngineConfig, f: Facts) -> str | None:
    max_len = _effective_max_len(c, f)
    if f.model_shape is None or not f.device_memory_bytes or not max_len or c.gpu_memory_utilization is None:
        return None
    est = estimate(
        f.model_shape,
        f.device_memory_bytes,
        utilization=c.gpu_memory_utilization,
        kv_cache_dtype=c.kv_cache_dtype,
        max_model_len=max_len,
        tp=c.gpus,
    )
    return est.reason()


RULES: tuple[Rule, ...] = (
    Rule("chunked_prefill_budget", _chunked_prefill_budget),
    Rule("fp8_kv_cache_on_cpu", _fp8_kv_on_cpu),
    Rule("ngram_window", _ngram_window),
    Rule("mtp_needs_heads", _mtp_needs_heads),
    Rule("dflash_triton_backend", _dflash_backend),
    Rule("suffix_needs_arctic_inference", _suffix_needs_arctic),
    Rule("tensor_parallel_divides_heads", _tp_divides_heads),
    Rule("tensor_parallel_fits_gpus", _tp_fits_gpus),
    Rule("memory_estimate", _memory_fits),
)


def incompatibilities(config: EngineConfig, facts: Facts) -> list[str]:
    """Every rule the config breaks, as ``rule: reason``. Empty means it may be launched."""
    return [f"{r.name}: {reason}" for r in RULES if (reason := r.check(config, facts))]


# ---------------------------------------------------------------- sampling


@dataclass
class _Sampler:
    trial: Suggester
    params: dict[str, Any] = field(default_factory=dict)

    def param(self, name: str, p: Any) -> Any:
        if p is None:
            return None
        if isinstance(p, IntRange):
            v: Any = self.trial.suggest_int(name, p.low, p.high, step=p.step, log=p.log)
        elif isinstance(p, FloatRange):
            v = self.trial.suggest_float(name, p.low, p.high, log=p.log)
        elif isinstance(p, IntChoices | FloatChoices | StrChoices | BoolChoices):
            v = p.choices[0] if len(p.choices) == 1 else self.trial.suggest_categorical(name, p.choices)
        else:
            v = p  # fixed
        self.params[name] = v
        return v


def stock_config(spec: StudySpec) -> EngineConfig:
    """vLLM's defaults for the model, plus only what the machine needs (engine.defaults)."""
    knobs = spec.engine.defaults.model_dump()
    tp = knobs["tensor_parallel_size"] or spec.engine.tensor_parallel_size
    return EngineConfig(**{**knobs, "tensor_parallel_size": tp if tp > 1 else None})


#: the knobs the sampler draws, in the knob table's order
KNOB_NAMES: tuple[str, ...] = tuple(SPACE_KNOBS)
#: the limits that interact with drafting: the speculative stage searches them again on top of tuned
DRAFT_LIMITS: tuple[str, ...] = tuple(n for n, k in SPACE_KNOBS.items() if k.redrawn_by_drafting)


def tuned_config(spec: StudySpec) -> EngineConfig | None:
    """The spec's ``tuned`` configuration (on top of engine.defaults), None when it gives none."""
    if spec.tuned is None:
        return None
    knobs = {k: v for k, v in spec.tuned.model_dump().items() if v is not None}
    return stock_config(spec).with_values(**knobs)


def baseline_config(role: str, spec: StudySpec, base: EngineConfig | None = None) -> EngineConfig | None:
    """What a baseline trial runs: ``stock`` the stock configuration, ``reference`` the spec's tuned
    one, ``tuned`` the stage's tuned configuration (``base``); None for a role that has none."""
    if role == "stock":
        return stock_config(spec)
    if role == "reference":
        return tuned_config(spec)
    if role == "tuned":
        return base
    return None


#: vLLM's own cap on its CUDA-graph batch sizes (CompilationConfig.max_cudagraph_capture_size)
VLLM_GRAPH_CAP = 512
#: flags in engine.extra_args that set the CUDA-graph sizes (or turn graphs off) themselves
_GRAPH_FLAGS = ("--max-cudagraph-capture-size", "--cudagraph-capture-sizes", "--enforce-eager")


def sweep_graph_size(spec: StudySpec, config: EngineConfig) -> int:
    """The largest batch, in tokens, the sweep's decode steps make: its highest concurrency x (1 +
    speculative tokens), on vLLM's stride of capture sizes (8 up to 256, 16 above) and at most 512."""
    k = config.speculative.num_speculative_tokens if config.speculative else 0
    size = max(spec.sweep.concurrency) * (1 + k)
    stride = 8 if size <= 256 else 16
    return min(VLLM_GRAPH_CAP, size if size < 8 else -(-size // stride) * stride)


def with_graph_sizes(spec: StudySpec, config: EngineConfig) -> EngineConfig:
    """``engine.cuda_graphs: sweep``: the configuration with max_cudagraph_capture_size set from the
    sweep (``sweep_graph_size``). vLLM's default sizes follow max_num_seqs (up to min(2 x
    max_num_seqs x (1 + k), 512)) and are part of its compile cache's key, so a searched max_num_seqs
    made every boot compile again (benchmarks/h200/boot_times.sh). Left as it is with ``vllm``, on the
    CPU, and where the spec sets the size (space, engine.defaults, tuned, extra_args)."""
    name = "max_cudagraph_capture_size"
    given = (
        getattr(spec.space, name) is not None
        or getattr(spec.engine.defaults, name) is not None
        or (spec.tuned is not None and getattr(spec.tuned, name) is not None)
        or any(a.split("=")[0] in _GRAPH_FLAGS for a in spec.engine.extra_args)
    )
    if spec.engine.cuda_graphs != "sweep" or spec.engine.device == "cpu" or given:
        return config
    return config.with_values(**{name: sweep_graph_size(spec, config)})


def sample(
    trial: Suggester, spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None
) -> EngineConfig:
    """Sample one configuration; fields the space leaves out fall back to engine.defaults.

    - ``joint``: every knob and the drafter, in one space;
    - ``tune``: the non-speculative knobs only (no drafter);
    - ``speculative``: ``base`` (the best tuned configuration) with the drafter (never none: none is
      the tuned baseline itself), num_speculative_tokens and the method's options searched, and the
      limits that interact with drafting (``DRAFT_LIMITS``) searched again where the space has them.
    """
    s = _Sampler(trial)
    space = spec.space
    values: dict[str, Any] = {}
    if stage == "speculative":
        if base is None:
            raise ValueError("the speculative stage samples on top of a tuned configuration (base)")
        config = base.with_values(speculative=None)
        names: tuple[str, ...] = DRAFT_LIMITS
    else:
        config = stock_config(spec)
        names = KNOB_NAMES
    for name in names:
        v = s.param(name, getattr(space, name))
        if v is not None:
            values[name] = v
    config = config.with_values(**values)
    if stage == "tune":
        return config
    sp = space.speculative
    methods = sp.methods()
    if stage == "speculative":
        drafters = [m for m in methods if m != "none"]
        method = s.param("spec_method", StrChoices(choices=drafters) if len(drafters) > 1 else drafters[0])
    else:
        method = s.param("spec_method", sp.method)
    if method and method != "none":
        k = s.param("num_speculative_tokens", sp.num_speculative_tokens)
        lookup_min = lookup_max = None
        if method == "ngram":
            lookup_min = s.param("prompt_lookup_min", sp.prompt_lookup_min)
            lookup_max = s.param("prompt_lookup_max", sp.prompt_lookup_max)
        spec_cfg = SpeculativeConfig(
            method=method,
            num_speculative_tokens=int(k),
            model=sp.drafters.get(method),
            prompt_lookup_min=lookup_min,
            prompt_lookup_max=lookup_max,
        )
        config = config.with_values(speculative=spec_cfg)
        if method == "dflash" and (config.attention_backend is None or stage == "speculative"):
            # the DFlash path needs the Triton attention backend (REFERENCE-STUDY.md): on top of a
            # tuned stack it replaces the tuned backend, as the reference launch does
            config = config.with_values(attention_backend="TRITON_ATTN")
    return config
