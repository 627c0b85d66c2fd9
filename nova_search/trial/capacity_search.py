"""The capacity search of one trial (``spec.capacity``): after the sweep, on the trial's server, the load
is doubled and then bisected (``measure.capacity.next_load``) until the most load that meets the SLO is
bracketed within the tolerance. Each probe is one window (``trial.window.run_window``): a concurrency
(closed loop) or a Poisson rate, its error budget replaced by the SLO's miss allowances (a probe clearly
over saturation is abandoned, and its errors never fail the trial), the GPUs' power sampled around it
(``engine.power``) and integrated over its measurement window only (``measure.energy``).

``search_capacity`` is the loop, given where it runs (``CapacityRun``: the server, its GPUs, callbacks);
``measure_capacity`` runs it for an Optuna trial: every probe's requests go to the trial's requests file
and the search so far is stored (``schema.CAPACITY``) after each probe, so a crash never loses one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import optuna

from nova_search import schema
from nova_search.engine.power import NVIDIA_SMI, PowerSampler, power_reader
from nova_search.engine.server import tail
from nova_search.errors import TrialFailure
from nova_search.loadgen.client import Target
from nova_search.loadgen.prompts import level_seed, prompt_source
from nova_search.measure.capacity import Capacity, Probe, next_load, price_for, probe_of
from nova_search.measure.energy import energy_j
from nova_search.measure.records import LevelRun
from nova_search.measure.slo import miss_rule
from nova_search.spec import ArrivalSpec, ClosedArrival, PoissonArrival, StudySpec
from nova_search.trial.context import Measurement, TrialContext, TrialReporter
from nova_search.trial.window import keep_requests, run_window, warmup_prompts, write_attr

#: a probe's prompts are seeded as a level of this index and up (a sweep has at most 100 levels), so
#: no probe sends a prompt a sweep level sent
PROBE_SEED_INDEX = 10_000
#: a poisson probe's cap of requests in flight, unless the spec gives one
DEFAULT_MAX_IN_FLIGHT = 1024


def probe_load(spec: StudySpec, load: float) -> tuple[int, ArrivalSpec]:
    """A probe's level key (concurrency) and arrival: the closed loop at ``load`` requests in flight, or
    Poisson arrivals at ``load`` requests a second under the in-flight cap."""
    if spec.closed_loop:
        return int(load), ClosedArrival()
    cap = spec.capacity.max_in_flight if spec.capacity else None
    arrival = spec.workload.arrival
    cap = (
        cap
        or (arrival.max_in_flight if isinstance(arrival, PoissonArrival) else None)
        or DEFAULT_MAX_IN_FLIGHT
    )
    return cap, PoissonArrival(kind="poisson", rate=load, max_in_flight=cap)


def _ignore(*_: object) -> None:
    pass


@dataclass(frozen=True)
class CapacityRun:
    """Where a capacity search runs: the trial's server (``target``), the GPUs it holds (``gpu_ids`` for
    the power reading, ``gpu_count`` for per GPU), the device's name (for its price), and callbacks:
    ``on_window(run, load, index)`` after each window, ``on_probe(capacity)`` after each probe is
    judged, ``alive()`` whether the server still runs, ``phase(text)`` progress."""

    target: Target
    gpu_ids: tuple[int, ...] = ()
    gpu_count: int = 1
    device_name: str | None = None
    on_window: Callable[[LevelRun, float, int], None] = field(default=_ignore)
    on_probe: Callable[[Capacity], None] = field(default=_ignore)
    alive: Callable[[], bool] = field(default=lambda: True)
    phase: Callable[[str], None] = field(default=_ignore)
    #: the program the power is read with (tests give a stand-in)
    power_program: str = NVIDIA_SMI


def search_capacity(spec: StudySpec, where: CapacityRun) -> Capacity:
    """Run the capacity search of ``spec`` (which has ``capacity`` and ``slo``) on ``where``'s server."""
    assert spec.capacity is not None and spec.slo is not None
    cap, slo = spec.capacity, spec.slo.to_slo()
    plan = cap.plan(spec.closed_loop)
    on_gpu = spec.engine.device == "cuda"
    source = prompt_source(spec.workload, spec.model)
    reader, energy_note = power_reader(spec.engine.device, where.gpu_ids, where.power_program)
    key, price = price_for(cap.gpu_hour_usd, where.device_name, on_gpu)
    if price is not None:
        cost_note = f"at ${price:g} a GPU-hour ({key!r} of capacity.gpu_hour_usd)"
    elif cap.gpu_hour_usd:
        cost_note = (
            f"no price in capacity.gpu_hour_usd for {where.device_name or 'this device'!r} "
            f"(keys: {', '.join(cap.gpu_hour_usd)})"
        )
    else:
        cost_note = "no price given (capacity.gpu_hour_usd)"
    probes: list[Probe] = []

    def found(done: bool) -> Capacity:
        return Capacity(
            slo=slo,
            plan=plan,
            probes=tuple(probes),
            gpus=where.gpu_count,
            done=done,
            usd_per_gpu_hour=price,
            price_key=key,
            cost_note=cost_note,
            energy_note=energy_note,
        )

    planned = spec.sweep.requests
    rule = miss_rule(slo, planned)
    while (load := next_load(probes, plan)) is not None:
        index = len(probes)
        concurrency, arrival = probe_load(spec, load)
        where.phase(f"capacity probe {index + 1}: {found(False).load_text(load)}")
        sampler = PowerSampler(reader, cap.power_interval_s).start() if reader is not None else None
        try:
            run = run_window(
                spec,
                source,
                where.target,
                concurrency=concurrency,
                seed=level_seed(spec.workload.seed, PROBE_SEED_INDEX + index),
                warmup=warmup_prompts(spec, source, PROBE_SEED_INDEX + index),
                arrival=arrival,
                miss_rule=rule,
            )
        finally:
            samples = sampler.stop() if sampler is not None else []
        energy = None
        if sampler is not None:
            energy = energy_j(
                samples, run.window_start, run.window_end, gap_s=max(2 * cap.power_interval_s, 1.0)
            )
            if energy is None:
                energy_note = sampler.problem or "too few power samples to cover the window: no J/token"
        where.on_window(run, load, index)
        if not where.alive():
            raise TrialFailure(
                "crash", f"the server died during the capacity probe at {found(False).load_text(load)}"
            )
        probes.append(probe_of(load, run, slo, planned, energy))
        where.on_probe(found(False))
    result = found(True)
    where.on_probe(result)
    return result


def measure_capacity(
    trial: optuna.Trial,
    ctx: TrialContext,
    progress: TrialReporter,
    measured: Measurement,
    target: Target,
    gpus: tuple[int, ...],
    gpu_count: int,
) -> Capacity:
    """The capacity search on the trial's server: stored after each probe (``schema.CAPACITY``), its
    requests kept, its windows counted as measurement time; its figures go to ``measured.figures``."""
    server, timing = measured.server, measured.timing
    origin: list[float] = []

    def on_window(run: LevelRun, load: float, index: int) -> None:
        origin.append(run.window_start)
        window = run.window_end - run.window_start
        timing["measure_s"] = timing.get("measure_s", 0.0) + window
        timing["capacity_s"] = timing.get("capacity_s", 0.0) + window
        level, _ = probe_load(ctx.spec, load)
        keep_requests(measured.requests_path, run, level=level, repeat=index, origin=origin[0], probe=load)

    def on_probe(capacity: Capacity) -> None:
        write_attr(trial, schema.CAPACITY, capacity, ctx.storage_retry_s)

    def alive() -> bool:
        return server.alive()

    where = CapacityRun(
        target=target,
        gpu_ids=gpus,
        gpu_count=gpu_count,
        device_name=ctx.facts.device_name,
        on_window=on_window,
        on_probe=on_probe,
        alive=alive,
        phase=progress.phase,
    )
    try:
        capacity = search_capacity(ctx.spec, where)
    except TrialFailure as e:
        if e.reason == "crash" and not e.log_tail:
            raise TrialFailure(e.reason, e.message, tail(server.log_path)) from None
        raise
    measured.figures = capacity.figures()
    progress.phase(capacity.text())
    return capacity
