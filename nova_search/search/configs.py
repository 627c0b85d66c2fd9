"""trial -> EngineConfig: the searched knobs drawn in a fixed order, and the baselines' configs.

Parameters are sampled in a fixed order; ``num_speculative_tokens`` and the method's options exist only
when the method is not none (TPE's ``group=True`` handles the conditional space). A sampled config is
then checked against ``search.rules`` before it is launched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from nova_search.knobs import SPACE_KNOBS, EngineConfig, SpeculativeConfig
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
    made every boot compile again (benchmarks/gpu/boot_times.sh). Left as it is with ``vllm``, on the
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
        k = s.param(sp.k_param_name(method), sp.k_param(method))
        lookup_min = lookup_max = None
        if method == "ngram":
            lookup_min = s.param("prompt_lookup_min", sp.prompt_lookup_min)
            lookup_max = s.param("prompt_lookup_max", sp.prompt_lookup_max)
        synthetic: dict[str, Any] = {}
        if (profile := sp.acceptance.get(method)) is not None:  # a projection (spec/acceptance.py)
            drawn = None
            if profile.lengths is not None:
                listed = profile.listed_lengths()
                drawn = s.param(
                    "acceptance_length",
                    FloatChoices(choices=listed)
                    if listed
                    else FloatRange(low=profile.lengths.low, high=profile.lengths.high),  # type: ignore[union-attr]
                )
                drawn = round(float(drawn), 2)
            synthetic = profile.speculative_config(drawn)
        spec_cfg = SpeculativeConfig(
            method=method,
            num_speculative_tokens=int(k),
            model=sp.drafters.get(method),
            prompt_lookup_min=lookup_min,
            prompt_lookup_max=lookup_max,
            **synthetic,  # type: ignore[arg-type]
        )
        config = config.with_values(speculative=spec_cfg)
        if method == "dflash" and (config.attention_backend is None or stage == "speculative"):
            # the DFlash path needs the Triton attention backend (studies/gemma-4-31b-dflash.yaml): on
            # top of a tuned stack it replaces the tuned backend, as the reference launch does
            config = config.with_values(attention_backend="TRITON_ATTN")
    return config
