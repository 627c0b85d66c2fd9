"""The slot's leader around one trial (``spec.confirm``): what is done before the trial's boot
(``prepare``) and after its sweep (``settle``), so that the trial's chain (``run``) makes two calls
where it walked through residency, the slot and confirmation in turn. The policy is here; how the
leader is kept (its memory budget, adopting one): ``residency``; how a trial is measured against it:
``confirm``.

- ``prepare``: a drafter of the speculative stage on a slot with no leader boots the tuned baseline as
  the leader (``residency.adopt_tuned``); then the leader is let go when the trial's server would not
  fit beside it, or belongs to another stage (``residency.make_room``).
- ``settle``: the trial is confirmed where it is wanted (``confirm.wants_confirmation``), first booting
  the study's best as the leader on a slot with none (``residency.adopt_leader``), against that leader
  (``confirm.confirm_trial``); then a feasible trial's server is offered as the leader
  (``residency.offer``).
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna

from nova_search import schema
from nova_search.db import retrying
from nova_search.knobs import EngineConfig
from nova_search.measure import objectives as obj
from nova_search.measure.feasibility import holds
from nova_search.measure.metrics import combine_repeats
from nova_search.trial.confirm import confirm_trial, head_to_head, wants_confirmation
from nova_search.trial.context import Measurement, TrialContext
from nova_search.trial.residency import BootLeader, adopt_leader, adopt_tuned, make_room, offer


@dataclass(frozen=True)
class LeaderPolicy:
    """The slot's leader policy for one trial whose server runs on ``gpus``; ``boot`` boots a finished
    trial's configuration as the leader."""

    trial: optuna.Trial
    ctx: TrialContext
    gpus: tuple[int, ...]
    boot: BootLeader

    def prepare(self, config: EngineConfig) -> list[str]:
        """Before the boot of the trial's ``config``: the notes of what happened to the leader."""
        adopted = adopt_tuned(self.trial, self.ctx, self.boot)
        room = make_room(self.ctx, self.gpus, config)
        return [x for x in (adopted, room) if x]

    def settle(self, measured: Measurement) -> tuple[bool, str]:
        """After the sweep: confirm the trial when it is wanted (first booting the study's best as the
        leader where the slot has none: ``adopt_leader``), then offer its server as the slot's leader.
        Returns whether the server stays up (as the leader; the caller stops it otherwise), and what
        happened, for the trial's summary line."""
        trial, ctx = self.trial, self.ctx
        slot, server = ctx.slot, measured.server
        if slot.park is None or ctx.spec.confirm is None:
            return False, ""
        levels = [combine_repeats(ws) for ws in measured.by_level.values()]
        skip = wants_confirmation(trial, ctx, levels, measured.figures)
        asleep = False
        notes = []
        if skip is None:
            awake, switched = True, 0.0
            if slot.leader is None and ctx.stage != "speculative":
                note, awake, switched = adopt_leader(trial, ctx, self.gpus, server, self.boot)
                notes += [note] if note else []
            asleep, p = confirm_trial(trial, ctx, measured, awake, switched)
            levels = [combine_repeats(ws) for ws in measured.by_level.values()]
            whom = "alone" if p.leader is None else f"vs #{p.leader}"
            notes.append(f"confirmed {whom}: {p.pairs} pair(s), {p.stopped or 'cut short'}")
        else:
            notes.append(f"not confirmed: {skip}")
        value = obj.objective_values(levels, ctx.spec.objectives, measured.figures)[0]
        conditions = [c.condition for c in ctx.spec.constraints]
        feasible = holds(obj.constraint_values(levels, conditions, measured.figures))
        if value is None or not feasible or not server.alive():
            return False, "; ".join(notes)
        role = retrying(lambda: schema.role_of(trial.user_attrs), ctx.storage_retry_s, "read a trial in")
        versus = head_to_head(p, ctx.spec.objectives[0]) if skip is None else None
        kept, note = offer(ctx, trial.number, server, float(value), role, asleep, versus)
        notes += ["kept as the leader"] if kept else []
        notes += [note] if note else []
        return kept, "; ".join(notes)
