"""nova's sampler around Optuna's: numbers seen in order, no configuration proposed twice, a spread-out
start.

``benchmarks/sampler_replay.py`` replays samplers on a table of real measurements (the CPU build, a
48-configuration grid, two passes of ``vllm bench serve``). Optuna's TPE with nova's settings needed as
many trials as random search to find a configuration within 5 % of the best, for three reasons that
``NovaSampler`` removes, each a wrapper around the study's sampler (the ``base``):

- **Numbers in order.** A knob given as a list of numbers (``max_num_seqs: {choices: [8, 16, 32]}``,
  the compile-friendly ``max_num_batched_tokens`` lists) is a categorical parameter to Optuna, and TPE
  treats categories as unordered: 32 teaches it nothing about 16. The base sampler sees such a list
  as an integer: the value's rank among the sorted choices (``IntDistribution(0, n - 1)``), through a
  view of the study (``ordinal.OrdinalView``); the study itself, the dashboard and every reader keep the
  values and the categorical distribution. Lists of two, and lists that are not all numbers, stay
  categorical.
- **No repeats.** Once it has a good configuration, a model-based sampler proposes it again, and on a
  space of short lists it does so often: every repeat is a boot paid again for a figure the study
  already holds. A joint (relative) proposal that repeats a trial of the study (COMPLETE, PRUNED,
  RUNNING or WAITING: measured, refused, stopped early, or being measured by another worker) is drawn
  again, up to ``tries`` times, then drawn at random among the configurations the study does not
  have. Only when there is none (the space measured through) is a repeat kept. A proposal repeats a
  trial when every parameter of that trial has the same value in it (a drafter's options drawn beside
  ``none`` do not make a configuration new).
- **A spread-out start.** While the base sampler is in its random start-up (TPE's
  ``n_startup_trials``: no joint proposal yet), the joint space is drawn here: of ``spread`` random
  configurations the study does not have, the one farthest from all it has (``distance``), so the
  first few trials cover each knob's range instead of landing by chance in one corner.

Parameters outside the joint space (the very first trial's, or a conditional one seen for the first
time) are drawn by the base sampler one by one, numbers in order too, and under the same no-repeat
rule: a value that would make the trial repeat one the study holds (the RUNNING trials of other
workers included) is drawn again, by the base sampler up to ``tries`` times, then at random.

**Workers started together** (a k8s Indexed Job starts every pod at once) load one spec and so one
seed: until a trial completes, every worker's sampler would draw the same start-up configurations.
Two things keep them apart (issue 40): each trial's draws are seeded from the study's seed and the
trial's number (``trial_seed``; trial numbers are unique across workers, and a single
worker with an explicit seed draws the same sequence run after run), and the worker draws a trial's
configuration under the budget lock, right after the ask (``worker.ask``), so the next worker's
no-repeat check sees it. With ``sampler.seed: null`` the seeds are fresh each run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from nova_search.db import cached_trials, rng_of
from nova_search.errors import SpecError
from nova_search.search.ordinal import OrdinalView, from_rank, ordered_choices, rank_distribution
from nova_search.spec import StudySpec

#: states of a trial whose configuration the study has (or is about to have)
_HELD = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)


def repeats(params: Mapping[str, Any], trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    """The first trial whose parameters all take the same value in ``params``, None if there is none."""
    for t in trials:
        if t.params and all(k in params and params[k] == v for k, v in t.params.items()):
            return t
    return None


def distance(a: Mapping[str, Any], b: Mapping[str, Any], dists: Mapping[str, BaseDistribution]) -> float:
    """How far apart two configurations are: per parameter, a number's difference over its range (of
    its logarithm on a log scale; a list of numbers by rank), else 1 when the values differ; a
    parameter one side lacks counts 1."""
    total = 0.0
    for name, d in dists.items():
        if name not in a or name not in b:
            total += 1.0
            continue
        ranks = ordered_choices(d)
        if ranks is not None:
            total += abs(ranks.index(a[name]) - ranks.index(b[name])) / (len(ranks) - 1)
        elif isinstance(d, IntDistribution | FloatDistribution) and d.high > d.low:
            f = math.log if d.log else float
            total += abs(f(a[name]) - f(b[name])) / (f(d.high) - f(d.low))
        else:
            total += float(a[name] != b[name])
    return total


# ---------------------------------------------------------------- the sampler


class WrappedSampler(optuna.samplers.BaseSampler):
    """A sampler around another (``base``): everything it does not change goes to the base. Subclasses
    change the sampling methods (``NovaSampler`` here, ``FittingSampler``)."""

    def __init__(self, base: optuna.samplers.BaseSampler) -> None:
        self.base = base

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


class PerTrialSeed(WrappedSampler):
    """The study's sampler with each trial's draws seeded from ``seed`` and the trial's number
    (``trial_seed``): workers that share a seed draw apart, and one worker's draws are
    the same run after run. Without a seed (``sampler.seed: null``) the base's own fresh seed is kept."""

    def __init__(self, base: optuna.samplers.BaseSampler, seed: int | None = None) -> None:
        super().__init__(base)
        self.seed = seed

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.seed is not None:
            reseed(self.base, trial_seed(self.seed, trial.number))
        super().before_trial(study, trial)


class NovaSampler(PerTrialSeed):
    """The study's sampler (``base``) with numbers in order, no repeats and a spread-out start; see the
    module docstring."""

    def __init__(
        self,
        base: optuna.samplers.BaseSampler,
        seed: int | None = None,
        *,
        tries: int = 8,
        draws: int = 2000,
        spread: int = 16,
    ) -> None:
        super().__init__(base, seed)
        self.tries = tries
        self.draws = draws
        self.spread = spread
        self._random = optuna.samplers.RandomSampler(seed=seed)

    def _random_for(self, study: optuna.Study, trial: FrozenTrial) -> optuna.samplers.RandomSampler:
        """The random draws of this trial: seeded from the trial (``trial_seed``), fresh without a seed."""
        if self.seed is None:
            return self._random
        return optuna.samplers.RandomSampler(seed=trial_seed(self.seed, trial.number))

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        space = self._base_space(study, trial)
        if space or _snapshot(study, (TrialState.COMPLETE, TrialState.PRUNED)):
            return space
        # nothing measured yet (the start-up; every worker at once in an Indexed Job): the space of
        # the trials the study holds, RUNNING ones included, drawn whole here (the spread-out start),
        # so that the no-repeat rule sees whole configurations rather than one parameter at a time
        return {k: d for k, d in _study_distributions(study).items() if not d.single()}

    def _base_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        view = OrdinalView(study)
        space = self.base.infer_relative_search_space(view, view.trial(trial))  # type: ignore[arg-type]
        actual = _study_distributions(study)
        # back to the study's own distributions: a relative parameter must match the one it suggests
        return {k: actual.get(k, d) if isinstance(d, IntDistribution) else d for k, d in space.items()}

    def _base_relative(
        self, view: OrdinalView, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        ranked = {k: rank_distribution(d) for k, d in search_space.items()}
        params = self.base.sample_relative(view, view.trial(trial), ranked)  # type: ignore[arg-type]
        return {k: from_rank(search_space[k], v) if k in search_space else v for k, v in params.items()}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        view = OrdinalView(study)
        # the base sampler proposes only in its own space (empty until a trial is measured)
        base_space = self._base_space(study, trial) if search_space else {}
        params = self._base_relative(view, trial, search_space) if base_space else {}
        if not params and not search_space:
            return params
        held = [t for t in _snapshot(study, _HELD) if t.number != trial.number]
        fixed = _fixed(trial)

        def new(p: Mapping[str, Any]) -> bool:  # as the trial will run it: its fixed values win
            return repeats({**p, **fixed}, held) is None

        if params and new(params):
            return params
        for _ in range(self.tries if params else 0):
            again = self._base_relative(view, trial, search_space)
            if new(again):
                return again
        # at random among what the study does not have: the start-up's draws (spread out), or a
        # repeat's replacement (the first new one found)
        dists = search_space if not params else {k: search_space[k] for k in params if k in search_space}
        candidates = []
        rng = self._random_for(study, trial)
        for _ in range(self.draws):
            drawn = {k: rng.sample_independent(study, trial, k, d) for k, d in dists.items()}
            candidate = {**params, **drawn}
            if new(candidate):
                candidates.append(candidate)
                if params or len(candidates) >= self.spread:
                    break
        if not candidates:
            return params  # every configuration tried: the space is measured through
        return max(candidates, key=lambda c: min((distance(c, t.params, dists) for t in held), default=0.0))

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        view = OrdinalView(study)

        def draw() -> Any:
            value = self.base.sample_independent(
                view,  # type: ignore[arg-type]
                view.trial(trial),
                param_name,
                rank_distribution(param_distribution),
            )
            return from_rank(param_distribution, value)

        value = draw()
        held = [t for t in _snapshot(study, _HELD) if t.number != trial.number]
        drawn = {**_fixed(trial), **trial.params}

        def new(v: Any) -> bool:  # whether this value leaves the trial short of repeating a held one
            return repeats({**drawn, param_name: v}, held) is None

        if not held or new(value):
            return value
        for _ in range(self.tries):
            again = draw()
            if new(again):
                return again
        rng = self._random_for(study, trial)
        for _ in range(self.draws):
            again = rng.sample_independent(study, trial, param_name, param_distribution)
            if new(again):
                return again
        return value  # every value repeats a held trial: the space is measured through here

    def reseed_rng(self) -> None:
        super().reseed_rng()
        self._random.reseed_rng()


def trial_seed(seed: int, number: int) -> int:
    """The seed of one trial's draws: from the study's seed and the trial's number (unique across
    workers), so that workers sharing a seed draw apart and one worker's draws are reproducible."""
    digest = hashlib.sha256(f"{seed}:{number}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def reseed(sampler: object, seed: int, _depth: int = 0) -> None:
    """Seed every random state of an Optuna sampler (and of the samplers it holds) with ``seed``."""
    if _depth > 3:
        return
    for value in vars(sampler).values():
        rng = rng_of(value)
        if rng is not None:
            rng.seed(seed)
        elif isinstance(value, optuna.samplers.BaseSampler):
            reseed(value, seed, _depth + 1)


def _fixed(trial: FrozenTrial) -> dict[str, Any]:
    """The values a queued trial was given (``enqueue_trial(params=...)``: a retry of a trial whose
    worker died mid-draw carries the part it had drawn). Optuna suggests them whatever the sampler
    proposes, so the no-repeat rule must judge a proposal with them in it: judged without them, a
    retry's remaining draws could complete a configuration the study already holds."""
    fixed = trial.system_attrs.get("fixed_params")
    return dict(fixed) if isinstance(fixed, dict) else {}


def _snapshot(study: optuna.Study, states: tuple[TrialState, ...]) -> list[FrozenTrial]:
    """The study's trials in ``states`` as this draw sees them: Optuna's per-ask snapshot (read once
    after ``ask``, as TPE reads it), not a read of the database per question. A worker draws under
    the budget lock, where no other worker can add a trial, so one read holds for the whole draw; a
    read per question made the draw 13 reads of every RUNNING trial, and the lock's serial section
    grew with the fleet."""
    return cached_trials(study, states)


def _study_distributions(study: optuna.Study) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for t in cached_trials(study):
        out.update(t.distributions)
    return out


@dataclass(frozen=True)
class TpeSettings:
    """nova's TPE (``make_sampler`` for ``sampler.name: tpe``): Optuna's ``TPESampler`` settings and
    ``NovaSampler``'s, in one record, so that ``benchmarks/sampler_eval`` can replay others."""

    n_startup_trials: int = 3
    n_ei_candidates: int = 24
    multivariate: bool = True
    group: bool = True
    constant_liar: bool = True
    #: Optuna 5 deprecates these TPE arguments (removed in 6.0); None keeps Optuna's default, unsaid
    prior_weight: float | None = None
    consider_endpoints: bool | None = None
    #: the share of the trials TPE models as good (Optuna's ``gamma``: 10 %, at most 25 trials)
    gamma_share: float | None = None
    #: NovaSampler: candidates the spread-out start chooses among, proposals drawn again on a repeat
    spread: int = 16
    tries: int = 8


def nova_tpe(seed: int | None, settings: TpeSettings | None = None) -> NovaSampler:
    """nova's TPE: ``NovaSampler`` around Optuna's ``TPESampler`` with ``settings``."""
    s = settings or TpeSettings()
    deprecated: dict[str, Any] = {}
    if s.prior_weight is not None:
        deprecated["prior_weight"] = s.prior_weight
    if s.consider_endpoints is not None:
        deprecated["consider_endpoints"] = s.consider_endpoints
    if s.gamma_share is not None:
        deprecated["gamma"] = _Gamma(s.gamma_share)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        base = optuna.samplers.TPESampler(
            multivariate=s.multivariate,
            group=s.group,
            constant_liar=s.constant_liar,
            seed=seed,
            n_startup_trials=s.n_startup_trials,
            n_ei_candidates=s.n_ei_candidates,
            **deprecated,
        )
    return NovaSampler(base, seed=seed, tries=s.tries, spread=s.spread)


@dataclass(frozen=True)
class _Gamma:
    """TPE's good trials: ``share`` of them, at least one, at most 25 (Optuna's cap)."""

    share: float

    def __call__(self, n: int) -> int:
        return min(max(1, math.ceil(self.share * n)), 25)


#: the one parameter a worker's slot constrains (``search.placement``)
TP = "tensor_parallel_size"


def make_sampler(spec: StudySpec) -> optuna.samplers.BaseSampler:
    seed = spec.sampler.seed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        name = spec.sampler.name
        # a model-based sampler sees lists of numbers in order, never proposes a configuration the
        # study already has, and starts spread out (this module; benchmarks/sampler_replay.py)
        if name == "tpe":
            return nova_tpe(seed)
        if name == "gp":
            if importlib.util.find_spec("torch") is None:  # Optuna's GPSampler needs it, at its first draw
                raise SpecError(
                    "sampler.name: gp needs PyTorch, which is not installed (pip install torch); "
                    "use tpe, nsga2 or random"
                )
            return NovaSampler(optuna.samplers.GPSampler(seed=seed), seed=seed)
        # the others draw each trial from its own seed too (workers started together draw apart)
        if name == "nsga2":
            return PerTrialSeed(optuna.samplers.NSGAIISampler(seed=seed), seed)
        if name == "random":
            return PerTrialSeed(optuna.samplers.RandomSampler(seed=seed), seed)
        raise SpecError("sampler.name: grid needs a finite space; use tpe, gp, nsga2 or random for this spec")


def _values(distribution: BaseDistribution) -> list[Any]:
    if isinstance(distribution, CategoricalDistribution):
        return list(distribution.choices)
    if isinstance(distribution, IntDistribution):
        return list(range(distribution.low, distribution.high + 1, distribution.step))
    return []


class FittingSampler(WrappedSampler):
    """The study's sampler, with ``tensor_parallel_size`` drawn only among ``allowed``.

    The parameter keeps the study's distribution and is drawn apart from the joint (relative) sample,
    as Optuna's ``PartialFixedSampler`` does for a fixed one. One allowed value is taken as it is;
    among several, the study's sampler proposes and a proposal that does not fit is drawn again (its
    proposal restricted to what fits), up to ``tries`` times, then the trial takes one in turn."""

    def __init__(self, base: optuna.samplers.BaseSampler, allowed: Sequence[int], tries: int = 32) -> None:
        super().__init__(base)
        self.allowed = tuple(allowed)
        self.tries = tries

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        space = self.base.infer_relative_search_space(study, trial)
        return {k: v for k, v in space.items() if k != TP}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        # a grouped TPE samples its groups whatever the search space says: TP is drawn on its own
        params = self.base.sample_relative(study, trial, search_space)
        return {k: v for k, v in params.items() if k != TP}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if param_name != TP:
            return self.base.sample_independent(study, trial, param_name, param_distribution)
        fits = [v for v in _values(param_distribution) if v in self.allowed]
        if not fits:
            raise SpecError(f"{TP}: none of the values drawn fits this worker's slot")
        if len(fits) == 1:
            return fits[0]
        for _ in range(self.tries):
            value = self.base.sample_independent(study, trial, param_name, param_distribution)
            if value in fits:
                return value
        return fits[trial.number % len(fits)]
