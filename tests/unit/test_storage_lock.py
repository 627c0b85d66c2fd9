"""The budget lock: one holder at a time on a SQLite file (filelock) and in memory, released when
the section raises; a storage it cannot lock is refused, saying what would work. PostgreSQL's
advisory lock, across processes and through a server restart: tests/integration/test_db.py."""

import itertools
import stat
import threading
import time
from types import SimpleNamespace

import pytest
from filelock import FileLock
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from nova_search.db import StorageLock
from nova_search.errors import StorageError


@pytest.mark.parametrize("url", ["mysql+pymysql://nova:secret@db/nova", "oracle://nova@db/nova"])
def test_a_dialect_without_a_lock_is_refused_by_name(url: str) -> None:
    engine = SimpleNamespace(url=make_url(url))  # only the URL is read before the refusal
    with pytest.raises(StorageError) as err:
        StorageLock(engine, "nova-search#budget")  # type: ignore[arg-type]
    text = str(err.value)
    assert f"cannot lock a {make_url(url).get_backend_name()} storage" in text
    assert "use PostgreSQL or SQLite" in text
    assert "secret" not in text


def _hold_in_threads(engine_url: str, name: str, n: int = 4) -> list[tuple[float, float]]:
    """``n`` threads, each with its own StorageLock (as each worker has), hold it in turn; the
    (entered, left) times of each hold."""
    engine = create_engine(engine_url)
    held: list[tuple[float, float]] = []
    start = threading.Barrier(n)

    def hold() -> None:
        lock = StorageLock(engine, name)
        start.wait()
        with lock:
            entered = time.monotonic()
            time.sleep(0.05)
            held.append((entered, time.monotonic()))

    threads = [threading.Thread(target=hold) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    engine.dispose()
    return sorted(held)


def test_the_sqlite_file_lock_lets_one_holder_in_at_a_time(tmp_path) -> None:
    db = tmp_path / "study.db"
    held = _hold_in_threads(f"sqlite:///{db}", "nova-search#budget")
    assert len(held) == 4
    assert all(left <= entered for (_, left), (entered, _) in itertools.pairwise(held)), held
    lock_file = tmp_path / "study.db.nova-lock"
    assert lock_file.exists(), "the lock file is kept, as an older nova's workers expect"
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600


def test_the_sqlite_file_lock_is_released_when_the_section_raises(tmp_path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'study.db'}")
    lock = StorageLock(engine, "nova-search#budget")
    with pytest.raises(RuntimeError), lock:
        raise RuntimeError("the section failed")
    other = FileLock(str(tmp_path / "study.db.nova-lock"), timeout=0)  # taken at once, or Timeout
    with other:
        assert other.is_locked
    with lock:  # and the same StorageLock can be taken again
        pass
    engine.dispose()


def test_an_in_memory_database_is_locked_within_the_process() -> None:
    held = _hold_in_threads("sqlite://", "nova-search#memory")
    assert len(held) == 4
    assert all(left <= entered for (_, left), (entered, _) in itertools.pairwise(held)), held
