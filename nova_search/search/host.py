"""Host and model facts, read at run time: the GPU (nvidia-smi), the CPU (/proc/cpuinfo), the engine's
optional packages and the model's config.json. The only I/O of the search; the rules (``search.rules``)
are pure functions of what it returns."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from nova_search.engine.memory import ModelShape
from nova_search.files import MAX_CONFIG_BYTES, read_text_bounded
from nova_search.search.rules import Facts, model_heads
from nova_search.spec import (
    StudySpec,
)


def _gpu_facts(gpus: tuple[int, ...]) -> tuple[str | None, int | None]:
    """The name and memory (bytes) of the worker's first GPU, from one nvidia-smi call; None for what
    it cannot say."""
    argv = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]
    if gpus:
        argv += ["-i", str(gpus[0])]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    lines = out.strip().splitlines()
    if not lines:
        return None, None
    name, _, mib = lines[0].rpartition(",")  # the name may hold a comma, the memory cannot
    try:
        return name.strip() or None, int(float(mib) * 1024 * 1024)
    except ValueError:
        return lines[0].strip() or None, None


#: optional packages some configurations need in the engine's environment (import names)
ENGINE_PACKAGES = ("arctic_inference",)


def engine_packages(python: str | None) -> frozenset[str] | None:
    """Which of ENGINE_PACKAGES the engine's interpreter can import (found, not imported), or None
    when there is no interpreter to ask or it cannot answer."""
    if not python:
        return None
    code = (
        "import importlib.util as u\n"
        f"print(' '.join(m for m in {ENGINE_PACKAGES!r} if u.find_spec(m) is not None))"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return frozenset(out.stdout.split())


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str | None, frozenset[str]] | None:
    """The host CPU's model name (None: not given) and flags, read at run time; None: unreadable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    m = re.search(r"^flags\s*:\s*(.*)$", text, flags=re.MULTILINE)
    flags = frozenset(m.group(1).split()) if m else frozenset()
    m = re.search(r"^model name\s*:\s*(.*)$", text, flags=re.MULTILINE)
    return (m.group(1).strip() if m else None), flags


def host_facts(spec: StudySpec, gpus: tuple[int, ...] = ()) -> Facts:
    cpu_name, flags = cpu_info() or (None, frozenset())
    on_gpu = spec.engine.device == "cuda"
    gpu_name, gpu_memory = _gpu_facts(gpus) if on_gpu else (None, None)
    device_name = gpu_name if on_gpu else cpu_name
    max_len, has_mtp, shape = None, False, None
    heads: tuple[int | None, int | None] = (None, None)
    try:
        # bounded, never blocking on a FIFO (an unreadable one is a clear error at the first trial)
        cfg = json.loads(read_text_bounded(Path(spec.model.path) / "config.json", MAX_CONFIG_BYTES))
        max_len = cfg.get("max_position_embeddings")
        has_mtp = bool(cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers"))
        shape = ModelShape.of(cfg) if isinstance(cfg, dict) else None
        heads = model_heads(cfg) if isinstance(cfg, dict) else heads
    except (OSError, ValueError):
        pass
    return Facts(
        device=spec.engine.device,
        cpu_flags=flags,
        model_max_len=max_len,
        model_has_mtp=has_mtp,
        device_name=device_name,
        engine_packages=engine_packages(spec.engine.resolved_python()),
        model_shape=shape if on_gpu else None,
        device_memory_bytes=gpu_memory,
        model_heads=heads[0],
        model_kv_heads=heads[1],
        gpu_count=len(gpus) if gpus else None,
    )
