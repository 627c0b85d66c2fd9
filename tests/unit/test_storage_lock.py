"""The budget lock refuses a storage it cannot lock, saying what would work."""

from types import SimpleNamespace

import pytest
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
