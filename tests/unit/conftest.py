"""Shared fixtures for the unit tests: the tiny-cpu study spec as a raw mapping and parsed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from nova_search.spec import StudySpec, parse_spec

REPO = Path(__file__).resolve().parents[2]
TINY_CPU = REPO / "studies" / "tiny-cpu.yaml"

_RAW = yaml.safe_load(TINY_CPU.read_text())


@pytest.fixture
def tiny_raw() -> dict[str, Any]:
    """A fresh, mutable copy of studies/tiny-cpu.yaml as loaded by YAML."""
    return copy.deepcopy(_RAW)


@pytest.fixture
def tiny_spec(tiny_raw: dict[str, Any]) -> StudySpec:
    return parse_spec(tiny_raw)


@pytest.fixture(autouse=True)
def _no_engine_python_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never inherit the machine's engine interpreter or storage; they set them explicitly."""
    monkeypatch.delenv("NOVA_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv("NOVA_STORAGE", raising=False)
