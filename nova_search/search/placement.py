"""Which GPUs a trial gets on a worker, and which tensor-parallel sizes a worker may draw.

A worker owns a GPU set (``--gpus``). The tensor-parallel sizes a stage's trials may launch
(``tp_values``: the space's ``tensor_parallel_size``, else the engine's, and the baselines') decide its
*slot size*: the largest of them that fits the set. The worker splits its GPUs into slots of that size
and runs one trial per slot at a time; a trial's server gets the first ``tensor_parallel_size`` GPUs of
its slot (``server_gpus``, through ``CUDA_VISIBLE_DEVICES``). Slots do not overlap and a slot runs one
server at a time, so every GPU serves at most one server at a time. With a fixed TP this is what it
always was: one trial per group of TP GPUs, side by side.

A trial whose TP does not fit the worker is never started there:

- a new trial never *draws* it: ``FittingSampler`` keeps the study's one distribution of
  ``tensor_parallel_size`` (every trial's record stays comparable, and the sampler learns from every
  worker's trials) and draws only values that fit, as Optuna's ``PartialFixedSampler`` fixes one;
- a queued trial whose configuration is already fixed (a baseline, a dead worker's retry) is left
  WAITING for a worker that fits it (``queued_gpus``; the worker's ask skips it), so it costs no budget.

A worker whose GPU set fits none of the sizes its stage draws refuses to start (``NoSlot``). Without
``--gpus`` a worker manages no GPUs: one slot, any size drawn, the server sees every GPU.

Pure functions of the spec and the worker's GPU set, apart from the sampler wrapper and the ask.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from nova_search import schema
from nova_search.db import forget_trials_cache, rdb_storage, study_id, trial_id
from nova_search.errors import SpecError
from nova_search.knobs import EngineConfig
from nova_search.search.configs import baseline_config, stock_config
from nova_search.search.sampler import TP
from nova_search.spec import IntChoices, IntRange, StudySpec

log = logging.getLogger("nova_search")


class NoSlot(SpecError):
    """The worker's GPU set fits none of the tensor-parallel sizes its stage draws."""


def sampled_tp(spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None) -> tuple[int, ...]:
    """The tensor-parallel sizes a stage's sampled trials may launch: the speculative stage keeps its
    tuned configuration's; otherwise the space's ``tensor_parallel_size``, else the stock one."""
    if stage == "speculative" and base is not None:
        return (base.gpus,)
    p = spec.space.tensor_parallel_size
    if p is None:
        return (stock_config(spec).gpus,)
    if isinstance(p, IntRange):
        return tuple(range(p.low, p.high + 1, p.step))
    if isinstance(p, IntChoices):
        return tuple(sorted(set(p.choices)))
    return (int(p),)


def tp_values(spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None) -> tuple[int, ...]:
    """Every tensor-parallel size a stage's trials may launch: the sampled ones and the baselines'."""
    roles = ("tuned",) if stage == "speculative" else (*spec.baselines, "reference")
    fixed = {c.gpus for r in roles if (c := baseline_config(r, spec, base)) is not None}
    return tuple(sorted({*sampled_tp(spec, stage, base), *fixed}))


@dataclass(frozen=True)
class Placement:
    """A worker's slots, and the tensor-parallel sizes it may draw (None: any, no GPU set given)."""

    slots: tuple[tuple[int, ...], ...]
    #: GPUs a slot holds; None without a GPU set
    size: int | None
    #: the sampled sizes this worker draws from; None: all of them (no GPU set, or they all fit)
    fitting: tuple[int, ...] | None

    def fits(self, gpus: int | None) -> bool:
        """Whether a trial needing ``gpus`` GPUs (None: drawn here, so it fits) can run in a slot."""
        return gpus is None or self.size is None or gpus <= self.size


def gpu_set(gpus: Sequence[int]) -> tuple[int, ...]:
    """A worker's (or node's) GPU ids as given; raises SpecError naming --gpus when one is listed twice."""
    gpus = tuple(gpus)
    if len(set(gpus)) != len(gpus):
        raise SpecError(
            f"--gpus {','.join(map(str, gpus))}: a GPU is listed twice (each GPU serves one server at a time)"
        )
    return gpus


def place(
    gpus: Sequence[int], spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None
) -> Placement:
    """Split a worker's GPU set into slots for a stage's trials; raises NoSlot (naming --gpus and the
    sizes) when the set fits none of the sizes the stage draws."""
    gpus = gpu_set(gpus)
    if not gpus:
        return Placement(slots=((),), size=None, fitting=None)
    drawn = sampled_tp(spec, stage, base)
    fitting = tuple(v for v in drawn if v <= len(gpus))
    if not fitting:
        source = "the tuned configuration" if stage == "speculative" else "space / engine"
        raise NoSlot(
            f"--gpus {','.join(map(str, gpus))}: trials of stage {stage} launch tensor_parallel_size "
            f"{' or '.join(map(str, drawn))} ({source}), so a worker needs at least {min(drawn)} GPUs; "
            f"this one has {len(gpus)}"
        )
    size = max(v for v in tp_values(spec, stage, base) if v <= len(gpus))
    slots = tuple(gpus[i * size : (i + 1) * size] for i in range(len(gpus) // size))
    return Placement(slots=slots, size=size, fitting=None if fitting == drawn else fitting)


def server_gpus(slot: tuple[int, ...], config: EngineConfig) -> tuple[int, ...]:
    """The GPUs a trial's server is given: the first ``tensor_parallel_size`` of its slot."""
    return slot[: config.gpus]


def queued_gpus(
    trial: FrozenTrial, spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None
) -> int | None:
    """The GPUs a queued trial needs, known before it runs: a baseline's configuration, a retry's or an
    enqueued trial's fixed ``tensor_parallel_size``, the speculative stage's tuned one; None when it is
    drawn when the trial runs (``FittingSampler`` keeps it inside the worker's slot)."""
    role = schema.ROLE.read(trial.user_attrs)
    if role is not None:
        config = baseline_config(role, spec, base)
        return config.gpus if config is not None else None
    if stage == "speculative" and base is not None:
        return base.gpus
    fixed = trial.system_attrs.get("fixed_params")
    value = trial.params.get(TP, fixed.get(TP) if isinstance(fixed, dict) else None)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def ask_fitting(study: optuna.Study, fits: Callable[[FrozenTrial], bool]) -> optuna.Trial:
    """``study.ask()``, except that a queued (WAITING) trial that does not fit this worker is left in
    the queue for one that it fits, where ``ask`` would pop the first one whatever it needs. The same
    steps as ``ask``: a worker that holds the budget lock is the only one popping."""
    storage = rdb_storage(study)
    waiting = storage.get_all_trials(study_id(study), deepcopy=False, states=(TrialState.WAITING,))
    left = [t for t in waiting if not fits(t)]
    if not left:
        return study.ask()
    log.info("queued trial(s) %s need more GPUs than this worker's slots hold", [t.number for t in left])
    forget_trials_cache(study)  # as ask does: the sampler must see every trial
    for t in waiting:
        try:
            if fits(t) and storage.set_trial_state_values(trial_id(t), state=TrialState.RUNNING):
                return optuna.Trial(study, trial_id(t))
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # finished meanwhile (told by a worker that lost its answer): as ask skips it
    return optuna.Trial(study, storage.create_new_trial(study_id(study)))
