"""``nova-search trained-model`` refuses, before building anything, what it cannot build: no engine
interpreter, a folder it cannot write, a bad size or corpus, each named by its flag. (The corpus and
the plan: tests/unit/test_trained_corpus.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import nova


def test_trained_model_without_an_engine_says_which_flag(tmp_path: Path) -> None:
    r = nova("trained-model", str(tmp_path / "pair"), env={"NOVA_ENGINE_PYTHON": ""})
    assert r.returncode != 0
    assert "--engine-python" in r.stderr and "NOVA_ENGINE_PYTHON" in r.stderr
    assert not (tmp_path / "pair").exists()


def test_trained_model_into_a_folder_it_cannot_write_names_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = nova("trained-model", str(blocker / "pair"), env={"NOVA_ENGINE_PYTHON": "/usr/bin/python3"})
    assert r.returncode != 0
    assert "DIR: cannot write the pair into" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--size", "huge"], "--size"),
        (["--size", "gpu"], "--corpus"),
        (["--corpus", "/nonexistent"], "--corpus"),
    ],
)
def test_trained_model_refuses_a_bad_size_or_corpus_by_its_flag(
    tmp_path: Path, args: list, flag: str
) -> None:
    r = nova("trained-model", str(tmp_path / "pair"), *args, env={"NOVA_ENGINE_PYTHON": "/usr/bin/python3"})
    assert r.returncode != 0 and flag in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "pair").exists()
