"""Confirmation's rules (pure), its spec, its stored record, the leader's budget, and the verdict's use
of the pairs (no engine)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import optuna
import pytest

from nova_search import schema
from nova_search.errors import SpecError, TrialFailure
from nova_search.knobs import EngineConfig
from nova_search.measure.objectives import Objective
from nova_search.measure.records import Paired
from nova_search.search.rules import Facts
from nova_search.spec import parse_spec
from nova_search.testing.specs import fake_spec_dict
from nova_search.trial.confirm import dominated_by, head_to_head, leader_first, pair_schedule, settled
from nova_search.trial.context import TrialContext
from nova_search.trial.residency import adopt_leader, make_room, offer
from nova_search.trial.slot import Resident, Slot, park_mode
from tests.support.builders import level

GIB = 1024**3
THROUGHPUT = Objective("output_throughput", "maximize", "best", 0)
TTFT = Objective("ttft_p99_ms", "minimize", 4, 1)


def test_pairs_alternate_leader_first_then_trial_first():
    assert [leader_first(k) for k in range(4)] == [True, False, True, False]  # A B, B A, A B, B A


def test_a_pair_runs_one_server_then_the_other_and_the_next_pair_starts_where_it_ended():
    levels = [64, 128]
    windows = [w for k in range(4) for w in pair_schedule(k, levels, with_leader=True)]
    L, T = True, False
    assert windows == [
        (L, 64), (L, 128), (T, 64), (T, 128),  # pair 0: leader first, up the levels
        (T, 128), (T, 64), (L, 128), (L, 64),  # pair 1: trial first, down
        (L, 64), (L, 128), (T, 64), (T, 128),
        (T, 128), (T, 64), (L, 128), (L, 64),
    ]  # fmt: skip
    switches = sum(a[0] != b[0] for a, b in pairwise(windows))
    assert switches == 4  # one a pair, not one a window
    for k in range(4):  # each pair has one window of each server at every level
        pair = pair_schedule(k, levels, with_leader=True)
        assert sorted(pair) == sorted((side, c) for side in (L, T) for c in levels)
    assert pair_schedule(1, [1, 16, 64], with_leader=False) == [(T, 64), (T, 16), (T, 1)]


def test_the_pairs_stop_when_every_level_separates_or_at_the_cap():
    apart = {
        64: ([100.0, 101.0, 99.0], [120.0, 121.0, 119.0]),
        128: ([200.0, 202.0, 199.0], [150.0, 151.0, 149.0]),
    }
    assert settled(apart, higher_is_better=True, min_pairs=3, max_pairs=5) == "separated"  # a gain, a loss
    close = {64: ([100.0, 101.0, 99.0], [100.5, 99.5, 100.2])}
    assert settled(close, higher_is_better=True, min_pairs=3, max_pairs=5) is None
    assert settled(close, higher_is_better=True, min_pairs=2, max_pairs=3) == "cap"
    two = {64: ([100.0, 101.0], [150.0, 151.0])}
    assert settled(two, higher_is_better=True, min_pairs=3, max_pairs=5) is None  # too few to judge


def test_a_trial_is_confirmed_unless_another_beat_it_everywhere_by_more_than_near():
    mine = [level(1, tok_s=100.0, ttft_p99=10.0), level(4, tok_s=300.0, ttft_p99=20.0)]
    much_better = [level(1, tok_s=150.0, ttft_p99=5.0), level(4, tok_s=450.0, ttft_p99=10.0)]
    a_bit_better = [level(1, tok_s=103.0, ttft_p99=9.8), level(4, tok_s=309.0, ttft_p99=19.5)]
    objectives = [THROUGHPUT, TTFT]
    assert dominated_by(mine, [(3, much_better)], objectives, near=0.05) == 3
    assert dominated_by(mine, [(3, a_bit_better)], objectives, near=0.05) is None  # near the front
    assert dominated_by(mine, [(2, a_bit_better), (3, much_better)], objectives, near=0.05) == 3


def test_the_spec_names_what_is_wrong_with_confirm():
    with pytest.raises(SpecError, match=r"confirm.levels: \[8\] not in sweep.concurrency \[1, 4\]"):
        parse_spec(fake_spec_dict(2, confirm={"levels": [8]}))
    with pytest.raises(SpecError, match="confirm.park: sleep needs vLLM's sleep mode"):
        parse_spec(fake_spec_dict(2, confirm={"park": "sleep"}))  # the stand-in spec's device is cpu
    with pytest.raises(SpecError, match=r"min_pairs \(4\) is above max_pairs \(3\)"):
        parse_spec(fake_spec_dict(2, confirm={"min_pairs": 4, "max_pairs": 3}))
    raw = fake_spec_dict(2, confirm={})
    assert park_mode(parse_spec(raw)) == "keep"  # auto on the CPU build
    raw["engine"]["device"] = "cuda"
    assert park_mode(parse_spec(raw)) == "sleep"
    assert park_mode(parse_spec(fake_spec_dict(2))) is None


def test_the_paired_record_reads_back_as_written():
    p = Paired(
        leader=2,
        park="sleep",
        pairs=3,
        stopped="separated",
        switch_s=2.5,
        levels={64: (({"output_throughput": 100.0},) * 3, ({"output_throughput": 120.0},) * 3)},
    )
    attrs = {schema.PAIRED.key: schema.PAIRED.encode(p)}
    assert schema.PAIRED.read(attrs) == p
    assert schema.PAIRED.read({schema.PAIRED.key: {"pairs": "x"}}) is None  # malformed: None, no crash


class _Server:
    def __init__(self) -> None:
        self.stopped = False
        self.base_url = "http://127.0.0.1:9"

    def stop(self) -> None:
        self.stopped = True

    def alive(self) -> bool:
        return not self.stopped


def _ctx(stage: str = "joint", reporter=None) -> TrialContext:
    """A trial's context on a sleeping slot of GPU 0 (140 GiB), its leader's host reserve 8 GiB."""
    raw = fake_spec_dict(2, confirm={"park": "sleep"})
    raw["engine"]["device"] = "cuda"
    slot = Slot((0,), "sleep", 8 * GIB)
    facts = Facts(device="cuda", device_memory_bytes=140 * GIB)
    extra = {} if reporter is None else {"reporter": reporter}
    return TrialContext(
        parse_spec(raw), "s", facts, Path("."), slot, stage=stage, storage_retry_s=1.0, **extra
    )


def _residency(
    monkeypatch, free_gib: float, available_gib: float = 100.0
) -> tuple[Slot, _Server, TrialContext]:
    from nova_search.engine import sleep as sleep_mode

    monkeypatch.setattr(sleep_mode, "gpu_free_bytes", lambda gpus: {g: int(free_gib * GIB) for g in gpus})
    monkeypatch.setattr(sleep_mode, "host_available_bytes", lambda: int(available_gib * GIB))
    ctx = _ctx()
    r = ctx.slot
    server = _Server()
    r.leader = Resident(server, 3, "joint", 1000.0, asleep=True)  # type: ignore[arg-type]
    r.servers.add(server)  # type: ignore[arg-type]
    return r, server, ctx


def test_the_leader_stays_while_the_next_server_fits_beside_it(monkeypatch):
    r, server, ctx = _residency(monkeypatch, free_gib=137.0)
    config = EngineConfig(gpu_memory_utilization=0.9)
    assert make_room(ctx, (0,), config) is None and not server.stopped  # 0.9 x 140 + 1 = 127 GiB <= 137


def test_the_leader_is_let_go_when_the_next_server_would_not_fit(monkeypatch):
    r, server, ctx = _residency(monkeypatch, free_gib=130.0)
    config = EngineConfig(gpu_memory_utilization=0.95)
    note = make_room(ctx, (0,), config)
    assert note is not None and "gpu_memory_utilization 0.95 needs 134.0 GiB of GPU 0" in note
    assert server.stopped and r.leader is None and server not in r.servers


def test_the_leader_is_let_go_when_the_host_runs_short_or_the_stage_changes(monkeypatch):
    r, server, ctx = _residency(monkeypatch, free_gib=137.0, available_gib=4.0)
    note = make_room(ctx, (0,), EngineConfig())
    assert note is not None and "under confirm.host_reserve_gib" in note and server.stopped
    r, server, ctx = _residency(monkeypatch, free_gib=137.0)
    ctx = replace(ctx, stage="speculative")
    assert "the stage changed" in (make_room(ctx, (0,), EngineConfig()) or "")


def test_a_trial_that_measured_higher_takes_the_leaders_place_and_the_note_gives_both_values(monkeypatch):
    from nova_search.engine import sleep as sleep_mode

    r, old, ctx = _residency(monkeypatch, free_gib=137.0)
    asleep: list[str] = []
    monkeypatch.setattr(sleep_mode, "sleep", lambda url, level=1: asleep.append(url) or 0.4)
    lower = _Server()
    assert offer(ctx, 4, lower, 990.0, "search", asleep=False) == (False, None)  # type: ignore[arg-type]
    assert not old.stopped and r.leader is not None and r.leader.number == 3
    higher = _Server()
    kept, note = offer(ctx, 5, higher, 1012.5, "search", asleep=False)  # type: ignore[arg-type]
    assert kept and note == "leader #3 let go: #5 measured 1012.5 against its 1000"
    assert old.stopped and old not in r.servers and higher in r.servers
    assert r.leader.number == 5 and r.leader.asleep and asleep == ["http://127.0.0.1:9"]


def test_against_the_leader_it_was_paired_with_a_trial_is_judged_on_their_pairs(monkeypatch):
    """The leader's stored 1000 may come from another machine: the pairs (one machine, one time) decide."""
    from nova_search.engine import sleep as sleep_mode

    monkeypatch.setattr(sleep_mode, "sleep", lambda url, level=1: 0.4)
    r, old, ctx = _residency(monkeypatch, free_gib=137.0)
    # higher than the stored 1000, lower than the leader measured in their pairs: it stays out
    assert offer(ctx, 4, _Server(), 1010.0, "search", False, (3, 1030.0, 1020.0)) == (False, None)  # type: ignore[arg-type]
    # pairs with another leader than the slot's: the stored value decides
    kept, note = offer(ctx, 5, _Server(), 990.0, "search", False, (2, 900.0, 990.0))  # type: ignore[arg-type]
    assert not kept and note is None and not old.stopped
    # lower than the stored value, higher in their pairs: it takes the place, and the note says why
    kept, note = offer(ctx, 6, _Server(), 995.0, "search", False, (3, 1001.0, 1008.0))  # type: ignore[arg-type]
    assert kept and note == "leader #3 let go: #6 measured 1008 against its 1001 in their pairs"
    assert old.stopped and r.leader is not None and r.leader.number == 6 and r.leader.value == 995.0


def _paired(leader: int | None, **levels: tuple[list[float], list[float]]) -> Paired:
    rows = {
        int(c[1:]): (tuple({"output_throughput": v} for v in a), tuple({"output_throughput": v} for v in b))
        for c, (a, b) in levels.items()
    }
    return Paired(leader, "sleep", 3, "cap", 1.0, rows)


def test_head_to_head_is_each_sides_median_at_the_objectives_level():
    p = _paired(
        1,
        c64=([100.0, 104.0, 90.0], [101.0, 99.0, 120.0]),
        c128=([200.0, 190.0, 210.0], [205.0, 211.0, 199.0]),
    )
    best = Objective("output_throughput", "maximize", "best")
    assert head_to_head(p, best) == (1, 200.0, 205.0)  # the best paired level's medians
    assert head_to_head(p, Objective("output_throughput", "maximize", 64)) == (1, 100.0, 101.0)
    assert head_to_head(p, Objective("output_throughput", "maximize", 16)) is None  # not a paired level
    assert head_to_head(p, Objective("ttft_p99_ms", "minimize", "best")) is None  # not in the windows
    assert head_to_head(_paired(None, c64=([], [1.0, 2.0, 3.0])), best) is None  # confirmed alone


# -------------------------------------------------------- a slot with no leader adopts the study's best


class _Reporter:
    def __init__(self) -> None:
        self.phases: list[str] = []

    def phase(self, number: int, text: str) -> None:
        self.phases.append(text)


def _study_with_finished(*finished: tuple[float, EngineConfig, float]) -> optuna.Trial:
    """An in-memory two-objective study with finished trials (throughput, config, constraint value),
    and a running trial to adopt a leader for."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    for value, config, violation in finished:
        study.add_trial(
            optuna.trial.create_trial(
                values=[value, 100.0],
                user_attrs={schema.CONFIG.key: schema.CONFIG.encode(config)},
                system_attrs={"constraints": [violation]},
            )
        )
    return study.ask()


def _adoption(monkeypatch, free_gib: float = 137.0) -> tuple[Slot, TrialContext, list[str]]:
    from nova_search.engine import sleep as sleep_mode

    calls: list[str] = []
    monkeypatch.setattr(sleep_mode, "gpu_free_bytes", lambda gpus: {g: int(free_gib * GIB) for g in gpus})
    monkeypatch.setattr(sleep_mode, "host_available_bytes", lambda: 100 * GIB)
    monkeypatch.setattr(sleep_mode, "sleep", lambda url, level=1: calls.append("sleep") or 3.0)
    monkeypatch.setattr(sleep_mode, "wake_up", lambda url: calls.append("wake") or 0.8)
    ctx = _ctx(reporter=_Reporter())
    return ctx.slot, ctx, calls


def _trial_server() -> _Server:
    server = _Server()
    server.base_url = "http://127.0.0.1:9"  # type: ignore[attr-defined]
    return server


def test_a_slot_with_no_leader_boots_the_studys_best_feasible_trial_beside_the_sleeping_trial(monkeypatch):
    r, ctx, calls = _adoption(monkeypatch)
    best = EngineConfig(max_num_seqs=64, gpu_memory_utilization=0.9)
    trial = _study_with_finished(
        (900.0, EngineConfig(max_num_seqs=8), 0.0),
        (1000.0, best, 0.0),
        (1500.0, EngineConfig(max_num_seqs=256), 1.0),  # higher, but it breaks a constraint
    )
    booted: list[EngineConfig] = []
    leader = _Server()

    def boot(config):
        booted.append(config)
        return leader

    note, awake, switched = adopt_leader(trial, ctx, (0,), _trial_server(), boot)  # type: ignore[arg-type]
    assert booted == [best] and calls == ["sleep"]  # the trial slept first, then #1 booted as it ran
    assert note == "the study's best #1 booted as the leader" and not awake and switched == 3.0
    assert r.leader is not None and r.leader.number == 1 and r.leader.value == 1000.0 and not r.leader.asleep
    assert leader in r.servers and ctx.reporter.phases == ["booting the study's best #1 as the leader"]


def test_a_slot_adopts_nothing_in_a_study_with_no_finished_trial(monkeypatch):
    r, ctx, calls = _adoption(monkeypatch)
    note, awake, switched = adopt_leader(  # type: ignore[arg-type]
        _study_with_finished(), ctx, (0,), _trial_server(), lambda *a: pytest.fail("booted")
    )
    assert (note, awake, switched, calls, r.leader) == ("", True, 0.0, [], None)


def test_the_trial_is_confirmed_alone_when_the_best_cannot_boot_beside_it(monkeypatch):
    # no room on the GPU once the trial sleeps: the trial is woken again, nothing boots
    r, ctx, calls = _adoption(monkeypatch, free_gib=100.0)
    trial = _study_with_finished((1000.0, EngineConfig(gpu_memory_utilization=0.9), 0.0))
    note, awake, switched = adopt_leader(trial, ctx, (0,), _trial_server(), lambda *a: pytest.fail("booted"))  # type: ignore[arg-type]
    assert note.startswith("#0 not booted as the leader: gpu_memory_utilization 0.9 needs 127.0 GiB")
    assert awake and calls == ["sleep", "wake"] and switched == pytest.approx(3.8) and r.leader is None
    # it ran on more GPUs than the trial's server has: not even the sleep
    r, ctx, calls = _adoption(monkeypatch)
    trial = _study_with_finished((1000.0, EngineConfig(tensor_parallel_size=2), 0.0))
    note, awake, _ = adopt_leader(trial, ctx, (0,), _trial_server(), lambda *a: pytest.fail("booted"))  # type: ignore[arg-type]
    assert note == "#0 not booted as the leader: it ran on 2 GPUs, the trial's server has 1"
    assert awake and calls == [] and r.leader is None

    # it does not come up: the trial is woken again and the note gives the reason
    def fails(config):
        raise TrialFailure("boot-timeout", "no /health in 30 s")

    r, ctx, calls = _adoption(monkeypatch)
    trial = _study_with_finished((1000.0, EngineConfig(), 0.0))
    note, awake, _ = adopt_leader(trial, ctx, (0,), _trial_server(), fails)  # type: ignore[arg-type]
    assert note == "#0 did not boot as the leader (boot-timeout): confirmed alone"
    assert awake and calls == ["sleep", "wake"] and r.leader is None
