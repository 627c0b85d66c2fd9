"""How many client processes a level gets when none is asked for (loadgen.procs.auto_processes)."""

from nova_search.loadgen.procs import CHUNKS_PER_PROCESS, LANES_PER_PROCESS, ClientPlan, auto_processes

EIGHT = ClientPlan(cpus=tuple(range(8, 16)))


def test_a_level_is_split_for_its_rate_not_its_width() -> None:
    # 512 in flight at the rate one H200 serves an 8B model (about 16k chunks/s): one process, which
    # loaded the server as vllm bench serve did; 8 processes read lower (crosscheck-h200 README)
    assert auto_processes(EIGHT, 512, 16_000.0) == 1
    assert auto_processes(EIGHT, 512, None) == 1
    assert auto_processes(EIGHT, LANES_PER_PROCESS + 1, None) == 2
    assert auto_processes(EIGHT, 512, 60_000.0) == -(-60_000 // CHUNKS_PER_PROCESS)


def test_processes_are_capped_by_cores_and_requests_in_flight() -> None:
    assert auto_processes(EIGHT, 4096, 1e9) == 8
    assert auto_processes(ClientPlan(), 4096, 1e9) == 1  # no client cores given: one process
    assert auto_processes(EIGHT, 2, 1e9) == 2
