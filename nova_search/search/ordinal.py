"""Numbers in order, for the base sampler (``sampler.NovaSampler``): a knob given as a list of three or
more numbers is a categorical parameter to Optuna, unordered to TPE; the base sampler sees it as an
integer instead, the value's rank among the sorted choices (``IntDistribution(0, n - 1)``), through a view
of the study (``OrdinalView``) that also drops TPE's per-proposal record (``tpe:relative_params``). The
study itself, the dashboard and every reader keep the values and the categorical distribution."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial

from nova_search.db import cached_trials, storage_of, trial_id


def ordered_choices(d: BaseDistribution) -> tuple[float, ...] | None:
    """The sorted choices of a categorical distribution of three or more numbers, else None."""
    if not isinstance(d, CategoricalDistribution) or len(d.choices) < 3:
        return None
    if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in d.choices):
        return None
    return tuple(sorted(d.choices))  # type: ignore[arg-type]


def rank_distribution(d: BaseDistribution) -> BaseDistribution:
    """An ``IntDistribution`` over the ranks of a list of numbers (``ordered_choices``), else ``d``."""
    ranks = ordered_choices(d)
    return d if ranks is None else IntDistribution(0, len(ranks) - 1)


class OrdinalView:
    """The study as the base sampler sees it: each parameter drawn from a list of numbers is its rank
    in the sorted list, with an ``IntDistribution`` over the ranks. Everything else is the study's."""

    def __init__(self, study: optuna.Study) -> None:
        self._study = study
        self._cache: dict[int, FrozenTrial] = {}  # finished trials do not change

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    @property
    def _storage(self) -> Any:
        return _NoProposalWrites(storage_of(self._study))

    def trial(self, t: FrozenTrial) -> FrozenTrial:
        if t.state.is_finished() and trial_id(t) in self._cache:
            return self._cache[trial_id(t)]
        dists = t.distributions
        if not any(ordered_choices(d) is not None for d in dists.values()):
            return t
        out = FrozenTrial(  # Optuna's public constructor: the same trial, its lists of numbers as ranks
            number=t.number,
            state=t.state,
            value=None,
            values=t.values,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
            params={k: to_rank(dists[k], v) for k, v in t.params.items()},
            distributions={k: rank_distribution(d) for k, d in dists.items()},
            user_attrs=t.user_attrs,
            system_attrs=t.system_attrs,
            intermediate_values=t.intermediate_values,
            trial_id=trial_id(t),
        )
        if t.state.is_finished():
            self._cache[trial_id(t)] = out
        return out

    def _get_trials(
        self, deepcopy: bool = True, states: Any = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        # the per-ask snapshot whatever the base asks for: TPE's constant liar reads RUNNING trials
        # past the cache, once per proposal, but under the budget lock no other worker adds one
        trials = cached_trials(self._study, states)
        return [self.trial(t) for t in trials]

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self._get_trials()


class _NoProposalWrites:
    """The study's storage as the base sampler sees it, less TPE's record of each joint proposal
    (``tpe:relative_params``, a system attribute written per proposal so that other processes' constant
    liar can read a RUNNING trial's parameters before they are suggested). nova draws a trial's whole
    configuration under the budget lock, so its parameters are in the study before any other worker
    draws; the record only cost a write per proposal (up to ``tries + 1`` under the lock) and named a
    proposal the no-repeat rule had turned down."""

    def __init__(self, storage: Any) -> None:
        self._inner = storage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        if not key.startswith(_TPE_PROPOSAL_KEY):
            self._inner.set_trial_system_attr(trial_id, key, value)


#: the system attribute TPE records each joint proposal under (``optuna.samplers._tpe.sampler``)
_TPE_PROPOSAL_KEY = "tpe:relative_params"


def to_rank(d: BaseDistribution, value: Any) -> Any:
    """A value of ``d`` as the base sampler sees it: its rank in a list of numbers, else itself."""
    ranks = ordered_choices(d)
    return value if ranks is None else ranks.index(value)


def from_rank(d: BaseDistribution, value: Any) -> Any:
    """A value the base sampler drew, back in ``d``'s terms (``to_rank`` undone)."""
    ranks = ordered_choices(d)
    return value if ranks is None else ranks[int(value)]
