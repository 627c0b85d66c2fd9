"""Shared fixtures. Real parts only: the CPU vLLM engine (NOVA_ENGINE_PYTHON, set by scripts/test.sh),
the tiny local model, PostgreSQL on 127.0.0.1. A missing dependency fails loudly; nothing is skipped.
The tiers by cost (markers in pyproject.toml): a plain ``pytest`` runs the default tier (pyproject's
addopts), ``pytest --all`` every tier (this file), scripts/test.sh its own runs of them; this file keeps
the engine tier honest."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nova_search.testing.specs import FAKE_ENGINE_TAG
from nova_search.testing.standin import StandinOptions, StandinServer
from tests.support import REPO  # noqa: F401 - the repository root, for tests that ask conftest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        dest="all_tiers",
        help="run every tier (engine, browser, recorded and faults too): drops the default tier's -m of "
        "pyproject's addopts; a -m given on the command line still applies",
    )


def _marker_given(args: tuple[str, ...] | list[str]) -> bool:
    """Whether the command line itself (not the addopts) selects by marker: ``-m EXPR``, ``-mEXPR``."""
    return any(a == "-m" or (a.startswith("-m") and not a.startswith("--")) for a in args)


def pytest_configure(config: pytest.Config) -> None:
    """``--all`` without a -m of the command line's: every tier (addopts' -m of the default tier is
    dropped).

    Ctrl-C is KeyboardInterrupt here, however the suite was started: a shell that starts a job in
    the background without job control ignores SIGINT in it, and Python keeps an ignored SIGINT, so
    the tests of interruption (and the workers they start) would see nothing."""
    if config.getoption("all_tiers") and not _marker_given(config.invocation_params.args):
        config.option.markexpr = ""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # This process's own tag, passed on to every stand-in engine its tests start (through the
    # workers' environment and the stand-in spec's engine.env), so that workers.fake_engines() counts
    # only those: the other processes of a parallel run (pytest-xdist, scripts/test.sh) and other runs
    # on the machine start their own. Set, not inherited: an xdist worker starts from its parent's.
    os.environ[FAKE_ENGINE_TAG] = uuid.uuid4().hex


#: fixtures that need the real vLLM engine: a test that asks for one is in the engine tier
ENGINE_FIXTURES = frozenset({"engine_python", "shared_vllm", "trained_pair"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers stay honest: a test that asks for the real engine without the ``engine`` marker would
    run (for minutes) in the default tier, so collection stops and names it; so it does for a file of
    tests sharing a module's fixture that ONE_WORKER_FILES does not name. Then the slowest first."""
    unmarked = [
        item.nodeid
        for item in items
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("engine") is None
    ]
    if unmarked:
        raise pytest.UsageError("mark these @pytest.mark.engine (they need vLLM): " + ", ".join(unmarked))
    shared = sorted({_file(item) for item in items if _uses_a_module_fixture(item)} - ONE_WORKER_FILES)
    if shared:
        raise pytest.UsageError(
            "add these to ONE_WORKER_FILES in tests/conftest.py (their tests share a module-scoped "
            "fixture, to be built once on one pytest-xdist worker): " + ", ".join(shared)
        )
    # The slowest first (a stable sort: within each kind, the files' order): parallel workers then end
    # together on the many short tests instead of one of them finishing a long study alone.
    items.sort(key=_slow_first)


#: The test files whose tests share a fixture built once for the module (or class): a study run by real
#: workers, an installed wheel, tens of seconds each. On pytest-xdist (scripts/test.sh) all of such a
#: file's tests go to one worker, which builds it once; every other test goes wherever a worker is free.
#: Collection fails naming a file that should be here and is not.
ONE_WORKER_FILES = frozenset(
    {
        "tests/integration/test_api_postgres.py",
        "tests/integration/test_dashboard.py",
        "tests/integration/test_deploy_answer_postgres.py",
        "tests/integration/test_exit_codes_postgres.py",
        "tests/integration/test_hostile_inputs.py",
        "tests/integration/test_install.py",
        "tests/unit/test_workloads.py",
    }
)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: without it installed, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup`` with ONE_WORKER_FILES as groups: its own scheduler, since pytest-xdist 3.8
    cannot group by marks on pytest 9.2 (it renames node ids, and pytest 9.2 no longer takes that:
    pytest-dev/pytest-xdist#1386)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class OneWorkerFiles(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in ONE_WORKER_FILES else super()._split_scope(nodeid)

    return OneWorkerFiles(config, log)


def _file(item: pytest.Item) -> str:
    """The test's file as its node id gives it (relative to the repository root)."""
    return item.nodeid.split("::", 1)[0]


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture set up once for its module (or class), not once per test."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs[-1].scope in ("module", "class", "package") for defs in info.name2fixturedefs.values())


def _slow_first(item: pytest.Item) -> int:
    """0: a study on the stand-in engine or PostgreSQL with worker processes (``*_standin.py``,
    ``*_postgres.py``, tens of seconds each), 1: the other integration tests, 2: unit tests."""
    path = Path(str(item.path))
    if "integration" not in path.parts:
        return 2
    return 0 if path.stem.endswith(("_standin", "_postgres")) else 1


@pytest.fixture(scope="session")
def engine_python() -> str:
    python = os.environ.get("NOVA_ENGINE_PYTHON")
    if not python or not Path(python).exists():
        pytest.fail(
            "NOVA_ENGINE_PYTHON must point at an interpreter with vLLM (CPU build); "
            "run the suite with `bash scripts/test.sh`, which sets it up"
        )
    return python


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nova_search.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def trained_pair(engine_python: str) -> Path:
    """The trained CPU pair (``nova-search trained-model``): built once per machine in the cache (about
    6 minutes on 2 cores), kept while the plan, the build's sources and the corpus are the same."""
    from nova_search.models.trained.build import build_trained_pair, default_dir

    build_trained_pair(default_dir(), engine_python)
    return default_dir()


@pytest.fixture
def standin() -> Iterator[Callable[..., StandinServer]]:
    """A factory: ``standin(tokens_per_chunk=3, ttft_s=0.05)`` starts a stand-in server on a free
    loopback port; every server it started is stopped when the test ends."""
    servers: list[StandinServer] = []

    def start(**options: object) -> StandinServer:
        server = StandinServer(StandinOptions(**options)).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def shared_vllm(engine_python: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """One real vLLM (CPU, tiny model) for every test that only reads from it, started with nova's own
    launcher: loopback, fresh API key, own process group, torn down at the end of the session."""
    from nova_search.testing.engine import pinned_tiny_vllm

    os.environ.setdefault("NOVA_ENGINE_PYTHON", engine_python)
    log = tmp_path_factory.mktemp("shared-vllm") / "server.log"
    with pinned_tiny_vllm(engine_python, tiny_model, log) as server:
        yield server


#: the storage backends every storage test runs on, one body each (as optuna's own storage tests do)
STORAGE_MODES = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))


@pytest.fixture(params=STORAGE_MODES)
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty storage of each backend: a SQLite file, or a fresh database on the PostgreSQL server
    (NOVA_TEST_PG; unreachable fails, never skips), dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'study.db'}"
        return
    from nova_search.testing.pg import fresh_database

    with fresh_database() as url:
        yield url
