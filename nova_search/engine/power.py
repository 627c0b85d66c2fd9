"""The GPUs' power draw while a window is measured: ``PowerSampler`` reads it from nvidia-smi (one short
call every ``interval_s``, in a thread of the worker) between ``start`` and ``stop``, each reading
stamped on ``time.perf_counter()`` (the clock of the window's records), so ``measure.energy`` integrates
it over the measurement window only.

No reading is ever made up: on the CPU build there is no sampler (``power_reader`` says why), and a
sampler whose nvidia-smi is missing or fails keeps no sample and says so (``problem``); the energy is
then absent, never zero. Each call is one short process that ends on its own (a timeout kills it), so a
worker that dies leaves none behind.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from nova_search.measure.energy import PowerSample

#: how long one nvidia-smi call may take
CALL_TIMEOUT_S = 5.0
#: nvidia-smi, as the worker finds it on its PATH
NVIDIA_SMI = "nvidia-smi"


def power_argv(gpus: Sequence[int], program: str = NVIDIA_SMI) -> list[str]:
    argv = [program, "--query-gpu=index,power.draw", "--format=csv,noheader,nounits"]
    if gpus:
        argv += ["-i", ",".join(map(str, gpus))]
    return argv


def parse_power(text: str) -> dict[int, float]:
    """``0, 312.45`` lines -> watts by GPU index; a GPU whose draw reads ``[N/A]`` is left out."""
    out: dict[int, float] = {}
    for line in text.strip().splitlines():
        index, _, watts = line.partition(",")
        try:
            out[int(index.strip())] = float(watts.strip())
        except ValueError:
            continue
    return out


Reader = Callable[[], dict[int, float]]


def nvidia_smi_reader(gpus: Sequence[int], program: str = NVIDIA_SMI) -> Reader:
    """One reading of ``gpus``' power draw (every GPU when empty); raises OSError or
    subprocess.SubprocessError when nvidia-smi cannot give it."""
    argv = power_argv(gpus, program)

    def read() -> dict[int, float]:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, check=True).stdout
        watts = parse_power(out)
        if not watts:
            raise subprocess.SubprocessError(f"no power.draw in nvidia-smi's answer: {out.strip()[:120]!r}")
        return watts

    return read


class PowerSampler:
    """Reads the power draw every ``interval_s`` from ``start`` to ``stop`` (a context manager too)."""

    def __init__(self, read: Reader, interval_s: float = 0.2) -> None:
        self._read = read
        self.interval_s = interval_s
        self.samples: list[PowerSample] = []
        #: why a reading failed (the first failure), or None
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _one(self) -> None:
        before = time.perf_counter()
        try:
            watts = self._read()
        except (OSError, subprocess.SubprocessError) as e:
            self.problem = self.problem or f"nvidia-smi gave no power reading: {type(e).__name__}: {e}"[:300]
            return
        at = (before + time.perf_counter()) / 2.0
        self.samples.extend(PowerSample(at, gpu, w) for gpu, w in watts.items())

    def _run(self) -> None:
        due = time.perf_counter()
        while not self._stop.is_set():
            self._one()
            if self.problem is not None and not self.samples:
                return  # nvidia-smi does not answer here: no point in asking again
            due += self.interval_s
            self._stop.wait(max(due - time.perf_counter(), 0.0))
        self._one()  # one reading after the window, so its end is covered

    def start(self) -> PowerSampler:
        self._thread = threading.Thread(target=self._run, name="nova-power", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[PowerSample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CALL_TIMEOUT_S + self.interval_s + 1.0)
        return list(self.samples)

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def power_reader(device: str, gpus: Sequence[int], program: str = NVIDIA_SMI) -> tuple[Reader | None, str]:
    """How this worker reads the power of ``gpus``, and a note: on the CPU build, none."""
    if device != "cuda":
        return None, f"engine.device is {device}: no GPU power to read, so no J/token (absent, not zero)"
    which = ",".join(map(str, gpus)) if gpus else "every GPU of the host"
    return nvidia_smi_reader(gpus, program), f"GPU power from nvidia-smi power.draw ({which})"
