"""Memory before boot: what a configuration needs on each GPU, from the model's config.json alone.

A dense or mixture-of-experts decoder's weights and KV cache follow from its shape:

    weights   = (embeddings [+ untied lm_head] + layers x (attention + MLP or experts)) x dtype bytes
    KV/token  = 2 (K and V) x layers x KV heads x head_dim x KV dtype bytes

split over the tensor-parallel GPUs (KV heads are replicated when there are fewer than GPUs). vLLM
gives the KV cache what is left of ``gpu_memory_utilization`` x the GPU's memory once the weights,
the peak activation and non-torch memory are taken, and refuses to start when that cannot hold one
sequence of ``max_model_len`` tokens. nova cannot know the activation peak before the boot, so its
estimate of the KV memory is an upper bound (weights and a small reserve only): a configuration is
pruned only when even that bound cannot hold one ``max_model_len`` sequence, so no configuration
that would boot is pruned for memory.

Checked against real boots (``benchmarks/memory_estimate.py``): on the H200 study's 9 boots the
weights came out at 15.26 GiB against vLLM's 15.27, the KV bytes per token exactly (fp8 at half), and
the bound 1.8-3.6 GiB above the KV memory vLLM found (the activation peak it cannot know); none of them
would have been pruned. On vLLM's CPU build, the tiny model's KV bytes a token match the engine's own
log (``tests/integration/test_memory_engine.py``).

Architectures whose KV cache this does not describe (MLA, sliding-window mixes, linear attention),
and quantized checkpoints, give no estimate, and the rule stays silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 1024**3
#: kept aside from the bound besides the weights: vLLM's non-torch memory was 0.22-0.24 GiB on the H200
RESERVE_BYTES = GIB // 4
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "half": 2, "float": 4}
#: model types whose attention is not plain multi-head/grouped (their KV cache is not 2 x heads x dim)
_UNSUPPORTED = ("deepseek", "kimi", "minimax", "mamba", "jamba", "rwkv", "falcon_h1", "qwen3_next")


@dataclass(frozen=True, slots=True)
class ModelShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    dtype_bytes: int
    #: routed experts per layer (0: dense) and each expert's MLP width
    experts: int = 0
    expert_intermediate: int = 0

    @classmethod
    def of(cls, cfg: dict[str, Any]) -> ModelShape | None:
        """The shape of a decoder's config.json (its ``text_config`` for a multimodal one), or None
        when its attention is not one nova can size."""
        if isinstance(cfg.get("text_config"), dict):
            cfg = {**cfg, **cfg["text_config"]}
        kind = str(cfg.get("model_type", "")).lower()
        if any(kind.startswith(u) for u in _UNSUPPORTED) or cfg.get("kv_lora_rank"):
            return None
        if cfg.get("quantization_config"):
            return None  # quantized weights are smaller than the dtype says: no bound nova can trust
        if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) and cfg.get("layer_types"):
            return None  # mixed sliding and full layers: a smaller cache than this formula says
        try:
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            layers = int(cfg["num_hidden_layers"])
            kv_heads = int(cfg.get("num_key_value_heads") or heads)
            head_dim = int(cfg.get("head_dim") or hidden // heads)
            vocab = int(cfg["vocab_size"])
            experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
            expert_w = int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0)
            intermediate = int(cfg.get("intermediate_size") or 0)
        except (KeyError, TypeError, ValueError):
            return None
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").removeprefix("torch.")
        if min(hidden, heads, layers, kv_heads, head_dim, vocab) <= 0 or dtype not in _DTYPE_BYTES:
            return None
        return cls(
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=intermediate,
            vocab=vocab,
            tied=bool(cfg.get("tie_word_embeddings", False)),
            dtype_bytes=_DTYPE_BYTES[dtype],
            experts=experts,
            expert_intermediate=expert_w if experts else 0,
        )

    @property
    def params(self) -> int:
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        if self.experts:
            mlp = self.experts * 3 * self.hidden * self.expert_intermediate + self.hidden * self.experts
        else:
            mlp = 3 * self.hidden * self.intermediate
        norms = 2 * self.hidden + 2 * self.head_dim
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.layers * (attention + mlp + norms) + self.hidden

    def weight_bytes(self, tp: int = 1) -> int:
        """Weights on each of ``tp`` GPUs (in the model's dtype; quantized checkpoints are smaller)."""
        return self.params * self.dtype_bytes // max(tp, 1)

    def kv_bytes_per_token(self, kv_cache_dtype: str | None = None, tp: int = 1) -> int:
        """KV cache bytes one token takes on each GPU."""
        per = 1 if (kv_cache_dtype or "auto").startswith("fp8") else self.dtype_bytes
        heads = max(self.kv_heads // max(tp, 1), 1)
        return 2 * self.layers * heads * self.head_dim * per


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    device_bytes: int
    utilization: float
    weight_bytes: int
    kv_bytes_per_token: int
    max_model_len: int

    @property
    def kv_bound_bytes(self) -> int:
        """At most this much KV cache: the GPU share less the weights and the reserve."""
        return int(self.utilization * self.device_bytes) - self.weight_bytes - RESERVE_BYTES

    @property
    def needed_bytes(self) -> int:
        """KV cache for one sequence of max_model_len tokens (vLLM refuses to start without it)."""
        return self.kv_bytes_per_token * self.max_model_len

    def reason(self) -> str | None:
        """Why this cannot boot, or None when it may."""
        share = f"gpu_memory_utilization {self.utilization:g} of {self.device_bytes / GIB:.1f} GiB"
        if self.kv_bound_bytes <= 0:
            return (
                f"{share} cannot hold the weights ({self.weight_bytes / GIB:.2f} GiB a GPU, estimated "
                "from config.json) and leave room for a KV cache"
            )
        if self.kv_bound_bytes < self.needed_bytes:
            return (
                f"{share} leaves at most {self.kv_bound_bytes / GIB:.2f} GiB for the KV cache after "
                f"{self.weight_bytes / GIB:.2f} GiB of weights; one {self.max_model_len}-token sequence "
                f"needs {self.needed_bytes / GIB:.2f} GiB ({self.kv_bytes_per_token} bytes a token): vLLM "
                "refuses to start"
            )
        return None


def estimate(
    shape: ModelShape,
    device_bytes: int,
    *,
    utilization: float,
    kv_cache_dtype: str | None,
    max_model_len: int,
    tp: int = 1,
) -> MemoryEstimate:
    """The estimate at an explicit ``utilization`` (vLLM's default differs by release: 0.92 in 0.26,
    0.9 before; the rule stays silent when the configuration leaves it to vLLM)."""
    return MemoryEstimate(
        device_bytes=device_bytes,
        utilization=utilization,
        weight_bytes=shape.weight_bytes(tp),
        kv_bytes_per_token=shape.kv_bytes_per_token(kv_cache_dtype, tp),
        max_model_len=max_model_len,
    )
