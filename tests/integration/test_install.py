"""The way users install: build the wheel, install it (not editable) into a fresh virtual environment,
and from a folder that is not the checkout run ``db upgrade``, ``create`` and a real one-trial study
(vLLM on the CPU, the tiny model). The Dockerfile installs the same way (see test_deploy_files).

The wheel carries nova's migrations: they live in the checkout's top-level ``alembic/`` and pyproject.toml
maps that folder to ``nova_search.db.migrations``, which needs every package named there (the first two
checks, without building anything)."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from nova_search.testing.specs import tiny_spec
from tests.support import REPO


def run(argv: list[str], cwd: Path, timeout: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("NOVA_STORAGE", "PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**clean, **env})
    assert r.returncode == 0, (
        f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    )
    return r


def test_pyproject_names_every_package_and_maps_the_top_level_alembic_folder() -> None:
    """A package folder missing from pyproject's list would be missing from the wheel (an editable install
    would not notice)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(d.relative_to(REPO).parts)
        for d in (REPO / "nova_search").rglob("*")
        if (d / "__init__.py").is_file()
    }
    migrations = {"nova_search.db.migrations", "nova_search.db.migrations.versions"}
    assert set(tool["packages"]) == on_disk | {"nova_search"} | migrations
    assert tool["package-dir"] == {"nova_search.db.migrations": "alembic"}
    assert "script.py.mako" in tool["package-data"]["nova_search.db.migrations"]


def test_the_checkout_keeps_the_migrations_in_the_top_level_alembic_folder() -> None:
    from nova_search.db.migrate import ALEMBIC_DIR, head_revision

    assert ALEMBIC_DIR == REPO / "alembic"
    assert (ALEMBIC_DIR / "env.py").is_file() and (ALEMBIC_DIR / "script.py.mako").is_file()
    assert head_revision() is not None
    # no __init__.py: with the repository root on sys.path (python -m pytest, the alembic CLI's
    # prepend_sys_path) a package named alembic there would shadow the alembic library
    assert not (ALEMBIC_DIR / "__init__.py").exists()
    assert not (ALEMBIC_DIR / "versions" / "__init__.py").exists()
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO / "alembic.ini")
    assert ini["alembic"]["script_location"] == "%(here)s/alembic"
    assert not (REPO / "nova_search" / "db" / "migrations").exists(), "the scripts have one home: alembic/"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with nova-search installed from its wheel; its bin folder."""
    tmp = tmp_path_factory.mktemp("install")
    wheels = tmp / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)], cwd=tmp)
    (wheel,) = wheels.glob("nova_search-*.whl")
    run([sys.executable, "-m", "venv", str(tmp / "v")], cwd=tmp)
    bin_dir = tmp / "v" / "bin"
    run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        cwd=tmp,
    )
    return bin_dir


def test_the_wheel_carries_the_migrations_and_installs_outside_the_checkout(installed: Path, tmp_path: Path):
    where = run(
        [str(installed / "python"), "-c", "import nova_search; print(nova_search.__file__)"], cwd=tmp_path
    )
    assert str(installed.parent) in where.stdout and str(REPO) not in where.stdout  # not the checkout
    scripts = run(
        [str(installed / "python"), "-c", "from nova_search.db.migrate import ALEMBIC_DIR as d; print(d)"],
        cwd=tmp_path,
    )
    packaged = Path(scripts.stdout.strip())  # alembic/ of the checkout, mapped into the package
    assert packaged.parts[-3:] == ("nova_search", "db", "migrations") and str(installed.parent) in str(
        packaged
    )
    assert (packaged / "env.py").is_file() and (packaged / "script.py.mako").is_file()
    out = run([str(installed / "nova-search"), "db", "upgrade", "--storage", "sqlite:///x.db"], cwd=tmp_path)
    assert "nova tables at revision 0003" in out.stdout


@pytest.mark.engine
def test_create_and_a_real_one_trial_study_from_the_installed_package(
    installed: Path, tmp_path: Path, engine_python: str, tiny_model: Path
):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec(tiny_model, name="installed", budget={"n_trials": 1})))
    nova = str(installed / "nova-search")
    url = "sqlite:///study.db"
    out = run([nova, "create", str(spec), "--storage", url], cwd=tmp_path)
    assert "created study installed" in out.stdout
    out = run([nova, "worker", "installed", "--storage", url], cwd=tmp_path, NOVA_ENGINE_PYTHON=engine_python)
    assert "COMPLETE" in out.stdout
    status = run([nova, "status", "installed", "--storage", url], cwd=tmp_path)
    assert "COMPLETE 1" in status.stdout and "tuned baseline: trial 0" in status.stdout
    # the real engine's timing: a boot, and measurement windows, on vLLM's CPU build (engine time)
    cost = re.search(r"engine time: (\d+) s .*: windows (\d+)%, boots (\d+)%", status.stdout)
    assert cost is not None and int(cost[1]) > 0 and int(cost[2]) > 0 and int(cost[3]) > 0, status.stdout
