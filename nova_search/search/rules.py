"""The compatibility table: a known-bad combination of knobs, host and model is never launched.

A sampled config is checked against ``RULES``; a rule is a pure function of the config and the facts
(``Facts``: what is known of the machine and the model, read by ``search.host``). A config that breaks
one ends PRUNED with the rule's reason, never launched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nova_search.engine.memory import ModelShape, estimate
from nova_search.knobs import EngineConfig


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


#: the rules that read nothing of the host or the model: what the spec alone decides (a max_model_len
#: the spec does not set is the model's, a fact, and then the chunked-prefill rule says nothing)
SPEC_RULES = frozenset({"chunked_prefill_budget", "ngram_window", "dflash_triton_backend"})


def spec_incompatibilities(config: EngineConfig) -> list[str]:
    """``incompatibilities`` by the rules that need no facts (``SPEC_RULES``): for a sampler that has
    not been given the host's (``search.refusals``)."""
    facts = Facts()
    return [
        f"{r.name}: {reason}" for r in RULES if r.name in SPEC_RULES and (reason := r.check(config, facts))
    ]


# ---------------------------------------------------------------- sampling
