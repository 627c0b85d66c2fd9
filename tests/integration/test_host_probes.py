"""What nova asks the engine's interpreter before a study (search/host.py), asked for real: a python
started as a subprocess. (The facts' rules: tests/unit/test_space.py.)"""

from __future__ import annotations


def test_engine_packages_asks_the_engine_interpreter(tmp_path) -> None:
    import sys

    from nova_search.search.host import engine_packages

    assert engine_packages(sys.executable) == frozenset()  # the project's venv has no arctic-inference
    assert engine_packages(None) is None
    assert engine_packages(str(tmp_path / "no-such-python")) is None
