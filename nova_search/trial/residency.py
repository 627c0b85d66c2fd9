"""When a slot keeps, adopts or lets go of its resident leader (``spec.confirm``; the leader itself lives
on the ``slot.Slot``): the server that trials are measured against, kept up between them (asleep in
vLLM's sleep mode on a GPU, awake beside the trial on the CPU build), its budget of GPU and host memory,
and how a slot with none adopts one: the study's best finished trial, or in the speculative stage the
tuned baseline, booted as it ran. How trials are measured against it: ``confirm``."""

from __future__ import annotations

import logging
from collections.abc import Callable

import optuna

from nova_search import schema
from nova_search.db import retrying
from nova_search.engine import sleep as sleep_mode
from nova_search.engine.server import Server
from nova_search.errors import TrialFailure
from nova_search.knobs import EngineConfig
from nova_search.measure.feasibility import best_feasible, better
from nova_search.search.rules import Facts
from nova_search.trial.context import TrialContext
from nova_search.trial.slot import GIB, Resident, Slot

log = logging.getLogger(__name__)

#: free GPU memory kept beyond a trial's gpu_memory_utilization share when it boots beside a sleeper
BOOT_MARGIN_BYTES = GIB
#: vLLM's default gpu_memory_utilization, for a trial that does not set it
DEFAULT_GPU_SHARE = 0.9


def make_room(ctx: TrialContext, gpus: tuple[int, ...], config: EngineConfig) -> str | None:
    """Before a boot of ``config`` on ``gpus`` of the trial's slot: let the leader go when the new
    server would not fit beside it (or it belongs to another stage). A note when it was let go."""
    slot = ctx.slot
    r = slot.leader
    if r is None:
        return None
    if r.stage != ctx.stage:
        return slot.let_go(f"the stage changed ({r.stage} -> {ctx.stage})")
    if not r.server.alive():
        return slot.let_go("its server exited")
    short = no_room(ctx, gpus, config)
    return None if short is None else slot.let_go(short)


def no_room(ctx: TrialContext, gpus: tuple[int, ...], config: EngineConfig) -> str | None:
    """Why a server of ``config`` on ``gpus`` would not fit beside the one already on the slot (the host
    under ``host_reserve_gib``, or its GPUs short of its share and a margin); None when it fits."""
    available = sleep_mode.host_available_bytes()
    if available is not None and available < ctx.slot.reserve_bytes:
        return f"the host has {available / GIB:.1f} GiB available, under confirm.host_reserve_gib"
    total = ctx.facts.device_memory_bytes
    free = sleep_mode.gpu_free_bytes(gpus) if ctx.spec.engine.device == "cuda" else None
    if free and total:
        share = config.gpu_memory_utilization or DEFAULT_GPU_SHARE
        need = share * total + BOOT_MARGIN_BYTES
        short = sorted(g for g, b in free.items() if b < need)
        if short:
            g = short[0]
            return (
                f"gpu_memory_utilization {share:g} needs {need / GIB:.1f} GiB of GPU {g}, which has "
                f"{free[g] / GIB:.1f} GiB free beside it"
            )
    return None


def no_room_for_weights(slot: Slot, facts: Facts) -> str | None:
    """Why the host cannot back up one more sleeper's weights and keep ``host_reserve_gib``; None
    when it can (or the server will not sleep)."""
    if slot.park != "sleep" or facts.model_shape is None:
        return None
    weights = facts.model_shape.weight_bytes()
    available = sleep_mode.host_available_bytes()
    if available is not None and available - weights < slot.reserve_bytes:
        return (
            f"its weights ({weights / GIB:.1f} GiB) would leave the host under "
            f"confirm.host_reserve_gib ({available / GIB:.1f} GiB available)"
        )
    return None


def offer(
    ctx: TrialContext,
    number: int,
    server: Server,
    value: float,
    role: str,
    asleep: bool,
    versus: tuple[int, float, float] | None = None,
) -> tuple[bool, str | None]:
    """Whether the trial's server stays as its slot's leader (its caller must not stop it then),
    and a note of what happened to the leader. ``value``: the trial's first objective; ``versus``:
    (leader, its value, the trial's) over their pairs (``confirm.head_to_head``), which decide
    against that leader in place of its stored value (measured, maybe, on another machine)."""
    slot = ctx.slot
    r = slot.leader
    maximize = ctx.spec.objectives[0].direction == "maximize"
    if versus is not None and r is not None and versus[0] == r.number:
        theirs, mine, where = versus[1], versus[2], " in their pairs"
    else:
        theirs, mine, where = (r.value if r else 0.0), value, ""
    if ctx.stage == "speculative":
        take = role == "tuned"  # speculative gains are measured against the tuned baseline
    else:
        take = r is None or better(mine, theirs, maximize)
    if not take:
        return False, None
    short = no_room_for_weights(slot, ctx.facts)
    if short is not None:
        return False, f"#{number} not kept as the leader: {short}"
    if r is None:
        note = None
    elif ctx.stage == "speculative":
        note = slot.let_go(f"#{number} is the tuned baseline")
    else:  # better by the medians, whether or not the pairs separated
        note = slot.let_go(f"#{number} measured {mine:.6g} against its {theirs:.6g}{where}")
    if slot.park == "sleep" and not asleep:
        sleep_mode.sleep(server.base_url)
    slot.leader = Resident(server, number, ctx.stage, value, asleep=slot.park == "sleep")
    slot.track(server)
    return True, note


#: boots a finished trial's configuration, as it ran, to be the slot's leader (``run._boot_leader``):
#: its server, up; raises TrialFailure (its server stopped) when it does not come up
BootLeader = Callable[[EngineConfig], Server]


def finished_trials(trial: optuna.Trial, retry_s: float, what: str) -> list[optuna.trial.FrozenTrial]:
    """The COMPLETE trials of ``trial``'s study other than it, read through a database restart
    (``what``: the read, for the error if the storage stays away)."""
    done = retrying(
        lambda: trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)),
        retry_s,
        what,
    )
    return [t for t in done if t.number != trial.number]


def study_leader(trial: optuna.Trial, ctx: TrialContext) -> optuna.trial.FrozenTrial | None:
    """The study's best finished feasible trial on the first objective, other than ``trial`` and with
    its configuration stored; None when there is none (the study's first trial)."""
    maximize = ctx.spec.objectives[0].direction == "maximize"
    done = finished_trials(trial, ctx.storage_retry_s, "read the finished trials from")
    stored = (t for t in done if t.values and schema.CONFIG.read(t.user_attrs) is not None)
    return best_feasible(stored, maximize)


def adopt_leader(
    trial: optuna.Trial, ctx: TrialContext, gpus: tuple[int, ...], server: Server, boot: BootLeader
) -> tuple[str, bool, float]:
    """A trial to be confirmed on a slot with no leader (its server on ``gpus``) boots the study's best
    finished trial beside it as the leader (its server sleeps first, in sleep mode), so that its pairs are
    with the study's front. Returns a note, whether the trial's server is awake, and the seconds its sleep
    and wake took. Where there is no finished trial, no room beside the trial (host memory for a sleeper's
    weights, the trial's GPUs for its share, or fewer GPUs than it ran on), or the leader does not boot,
    the trial is awake and confirmed alone, and the note says why."""
    best = study_leader(trial, ctx)
    config = schema.CONFIG.read(best.user_attrs) if best is not None else None
    if best is None or config is None:
        return "", True, 0.0
    slot = ctx.slot
    short = no_room_for_weights(slot, ctx.facts)
    if short is None and gpus and config.gpus > len(gpus):  # (no GPUs: the CPU build)
        short = f"it ran on {config.gpus} GPUs, the trial's server has {len(gpus)}"
    if short is not None:
        return f"#{best.number} not booted as the leader: {short}", True, 0.0
    sleeps = slot.park == "sleep"
    switched = sleep_mode.sleep(server.base_url) if sleeps else 0.0
    short = no_room(ctx, gpus, config)
    why = f"#{best.number} not booted as the leader: {short}" if short else ""
    if not why:
        ctx.reporter_for(trial).phase(f"booting the study's best #{best.number} as the leader")
        try:
            leader = boot(config)
        except TrialFailure as e:
            why = f"#{best.number} did not boot as the leader ({e.reason}): confirmed alone"
        else:
            slot.leader = Resident(leader, best.number, ctx.stage, float(best.values[0]))
            slot.track(leader)
            return f"the study's best #{best.number} booted as the leader", not sleeps, switched
    if sleeps:
        switched += sleep_mode.wake_up(server.base_url)
    return why, True, switched


def adopt_tuned(trial: optuna.Trial, ctx: TrialContext, boot: BootLeader) -> str | None:
    """A drafter trial of the speculative stage on a slot with no leader (its worker's first: another
    worker, or an earlier run, measured the tuned baseline) boots that finished baseline, as it ran,
    and keeps it as the slot's leader, asleep, so the drafter is judged on ABBA pairs with it like the
    rest. A note of what happened, or None."""
    slot = ctx.slot
    if slot.park is None or slot.leader is not None or ctx.stage != "speculative":
        return None
    if schema.ROLE.read(trial.user_attrs) == "tuned":
        return None
    done = finished_trials(trial, ctx.storage_retry_s, "read the tuned baseline from")
    tuned = next((t for t in done if schema.ROLE.read(t.user_attrs) == "tuned" and t.values), None)
    config = schema.CONFIG.read(tuned.user_attrs) if tuned is not None else None
    if tuned is None or config is None:
        return None
    ctx.reporter_for(trial).phase(f"booting the tuned baseline #{tuned.number} as the leader")
    try:
        server = boot(config)
    except TrialFailure as e:
        return f"the tuned baseline #{tuned.number} did not boot as the leader ({e.reason}): confirmed alone"
    kept, note = offer(ctx, tuned.number, server, float(tuned.values[0]), "tuned", asleep=False)
    if not kept:  # the host cannot hold a sleeper's weights beside the trial
        slot.stop(server)
        return note
    return f"tuned baseline #{tuned.number} booted as the leader"
