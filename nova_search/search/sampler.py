"""nova's sampler around Optuna's: numbers seen in order, no configuration proposed twice, none the rules
refuse, a spread-out start, then steps from the best.

``benchmarks/sampler_eval`` replays samplers on many tables (the measured CPU grid under each of its
objectives, the recorded GPU studies, 48 seeded synthetic serving surfaces), tuned on a training
split and reported on a held-out one; ``benchmarks/sampler_replay.py`` on the measured CPU grid alone.
``NovaSampler`` wraps the study's sampler (the ``base``, Optuna's TPE for ``sampler.name: tpe``):

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
  ``none`` do not make a configuration new; ``neighbours.repeats``).
- **Nothing the rules refuse.** A configuration nova's compatibility rules refuse before launch
  (``refusals.RuleCheck``: the worker's host facts where it has them, ``use_facts``) counts as held:
  it is never proposed, the very first trial's included (drawn whole, at random, until the rules
  accept it). A configuration that fails at boot for a reason the rules do not know is still told
  PRUNED and infeasible, and the base sampler's constraint model learns from it.
- **A spread-out start.** While the base sampler is in its random start-up (TPE's
  ``n_startup_trials``: no joint proposal yet), the joint space is drawn here: of ``spread`` random
  configurations the study does not have, the one farthest from all it has (``neighbours.distance``),
  so the first few trials cover each knob's range instead of landing by chance in one corner.
- **Steps from the best** (``local``). Once ``local_after`` trials are measured and feasible, a trial
  takes the new configuration one step from the best one (a list's next number up or down, another
  choice of a list: ``neighbours.steps``; of a multi-objective study's front, the trial nearest to
  the base's proposal), the step nearest to the base's proposal; a range keeps the proposal's value.
  Only when every step from the best is held does the base's proposal run as it is. Serving surfaces
  are mostly plateaus and slopes broken by cliffs: a step from the best finds the slope's top sooner
  than TPE's proposals, which at a handful of trials are half its prior. ``benchmarks/sampler_eval``
  (results/sampler-eval): over the held-out tables where random search needs more than 2 trials, the
  median trials to within 5 % of the best were 0.63x random's before the steps and the rules, and
  0.52x with them (geometric mean; at most half of random's on 16, then 22, of 43 tables; with a
  third measured grid, 29 of 55; with each table's host facts given as a worker gives its own,
  0.515x and 30 of 55).

Parameters outside the joint space (a conditional one seen for the first time) are drawn by the base
sampler one by one, numbers in order too, and under the same no-repeat rule: a value that would make
the trial repeat one the study holds (the RUNNING trials of other workers included) is drawn again, by
the base sampler up to ``tries`` times, then at random.

**Workers started together** (a k8s Indexed Job starts every pod at once) load one spec and so one
seed: until a trial completes, every worker's sampler would draw the same start-up configurations.
Two things keep them apart (issue 40): each trial's draws are seeded from the study's seed and the
trial's number (``trial_seed``; trial numbers are unique across workers, and a single
worker with an explicit seed draws the same sequence run after run), and the worker draws a trial's
configuration under the budget lock, right after the ask (``worker.ask``), so the next worker's
no-repeat check sees it. With ``sampler.seed: null`` the seeds are fresh each run.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from nova_search.db import cached_trials
from nova_search.errors import SpecError
from nova_search.measure.feasibility import feasible
from nova_search.results.select import direction_of, pareto_front
from nova_search.search.neighbours import distance, repeats, steps
from nova_search.search.ordinal import OrdinalView, from_rank, rank_distribution
from nova_search.search.refusals import RuleCheck
from nova_search.search.rules import Facts
from nova_search.search.wrapping import PerTrialSeed, WrappedSampler, trial_seed
from nova_search.spec import StudySpec

__all__ = [
    "NovaSampler",
    "PerTrialSeed",
    "TpeSettings",
    "distance",
    "make_sampler",
    "nova_samplers",
    "nova_tpe",
    "repeats",
    "use_facts",
]

#: states of a trial whose configuration the study has (or is about to have)
_HELD = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)


# ---------------------------------------------------------------- the sampler


class NovaSampler(PerTrialSeed):
    """The study's sampler (``base``) with numbers in order, no repeats, nothing the rules refuse, a
    spread-out start and steps from the best; see the module docstring."""

    def __init__(
        self,
        base: optuna.samplers.BaseSampler,
        seed: int | None = None,
        *,
        tries: int = 8,
        draws: int = 2000,
        spread: int = 16,
        local: bool = False,
        local_after: int = 2,
        rules: RuleCheck | None = None,
    ) -> None:
        super().__init__(base, seed)
        self.tries = tries
        self.draws = draws
        self.spread = spread
        self.local = local
        self.local_after = local_after
        self.rules = rules
        self._random = optuna.samplers.RandomSampler(seed=seed)
        #: the first trial's configuration, drawn whole (``RuleCheck.draw``), by trial number
        self._first: dict[int, dict[str, Any]] = {}

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
        known = _study_distributions(study)
        if not known and self.rules is not None:
            # the study's very first trial: drawn whole at random here, until the rules accept it
            first = self.rules.draw(study, self._random_for(study, trial), self.tries * 4)
            if first is not None:
                params, dists = first
                space = {k: d for k, d in dists.items() if not d.single()}
                self._first[trial.number] = {k: v for k, v in params.items() if k in space}
                return space
        # nothing measured yet (the start-up; every worker at once in an Indexed Job): the space of
        # the trials the study holds, RUNNING ones included, drawn whole here (the spread-out start),
        # so that the no-repeat rule sees whole configurations rather than one parameter at a time
        return {k: d for k, d in known.items() if not d.single()}

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
        if trial.number in self._first:
            return self._first.pop(trial.number)
        view = OrdinalView(study)
        # the base sampler proposes only in its own space (empty until a trial is measured)
        base_space = self._base_space(study, trial) if search_space else {}
        params = self._base_relative(view, trial, search_space) if base_space else {}
        if not params and not search_space:
            return params
        held = [t for t in _snapshot(study, _HELD) if t.number != trial.number]
        fixed = _fixed(trial)

        def new(p: Mapping[str, Any]) -> bool:  # as the trial will run it: its fixed values win
            whole = {**p, **fixed}
            return repeats(whole, held) is None and not (
                self.rules is not None and self.rules.refuses(study, whole)
            )

        if self.local and search_space:
            step = self._step(study, trial, search_space, params, new, held)
            if step is not None:
                return step
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
            return params  # every configuration tried (or refused): the space is measured through
        return max(candidates, key=lambda c: min((distance(c, t.params, dists) for t in held), default=0.0))

    def _step(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        search_space: dict[str, BaseDistribution],
        proposal: dict[str, Any],
        new: Callable[[Mapping[str, Any]], bool],
        held: list[FrozenTrial],
    ) -> dict[str, Any] | None:
        """The new configuration one step from the best trial nearest to the base's proposal (ties at
        random); None before ``local_after`` feasible measured trials, or when every step is held. A
        step is new in its lists: with a range in the space, one whose lists' values a held trial has
        is not a step (else steps, new by the range's value alone, would never run out)."""
        done = [t for t in _snapshot(study, (TrialState.COMPLETE,)) if t.values and feasible(t)]
        if len(done) < max(self.local_after, 1):
            return None
        directions = [direction_of(d) for d in study.directions]
        best = min(pareto_front(done, directions), key=lambda t: distance(proposal, t.params, search_space))
        # a list's value is the best's, a step away in one of them; a range's is the proposal's
        names = sorted(k for k, d in search_space.items() if isinstance(d, CategoricalDistribution))

        def lists(p: Mapping[str, Any]) -> str:
            return repr([(k, p.get(k)) for k in names])

        seen = {lists(t.params) for t in held}
        centre = {**proposal, **{k: best.params[k] for k in names if k in best.params}}
        moves = [m for m in steps(centre, best.params, search_space) if lists(m) not in seen and new(m)]
        if not moves:
            return None
        rng = self._random_for(study, trial)
        tie = FloatDistribution(0.0, 1.0)
        keyed = [
            (distance(m, proposal, search_space), rng.sample_independent(study, trial, "tie", tie), i)
            for i, m in enumerate(moves)
        ]
        return moves[min(keyed)[2]]

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


def nova_samplers(sampler: optuna.samplers.BaseSampler) -> Iterator[NovaSampler]:
    """nova's sampler(s) inside ``sampler``, whatever wraps them (``WrappedSampler``s, outermost first)."""
    while isinstance(sampler, WrappedSampler):
        if isinstance(sampler, NovaSampler):
            yield sampler
        sampler = sampler.base


def use_facts(sampler: optuna.samplers.BaseSampler, facts: Facts) -> None:
    """Give nova's sampler (inside whatever wraps it) the worker's host facts: its rule check then
    asks every rule (``refusals.RuleCheck``), not only those the spec alone decides."""
    for nova in nova_samplers(sampler):
        if nova.rules is not None:
            nova.rules.facts = facts


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
    ``NovaSampler``'s, in one record, so that ``benchmarks/sampler_eval`` replays others (its ``tune``:
    none of the TPE settings moved the training split's figure past the noise of its seeds; the steps
    from the best and the rules did)."""

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
    #: NovaSampler: steps from the best, once this many trials are measured and feasible
    local: bool = True
    local_after: int = 2


def nova_tpe(
    seed: int | None, settings: TpeSettings | None = None, rules: RuleCheck | None = None
) -> NovaSampler:
    """nova's TPE: ``NovaSampler`` around Optuna's ``TPESampler`` with ``settings``, asking ``rules``."""
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
    return NovaSampler(
        base,
        seed=seed,
        tries=s.tries,
        spread=s.spread,
        local=s.local,
        local_after=s.local_after,
        rules=rules,
    )


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
            return nova_tpe(seed, rules=RuleCheck(spec))
        if name == "gp":
            # Optuna's GPSampler needs both, at its first draw
            if any(importlib.util.find_spec(m) is None for m in ("torch", "scipy")):
                raise SpecError(
                    "sampler.name: gp needs PyTorch and SciPy, which are not both installed "
                    "(pip install torch scipy); use tpe, nsga2 or random"
                )
            return NovaSampler(optuna.samplers.GPSampler(seed=seed), seed=seed, rules=RuleCheck(spec))
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
