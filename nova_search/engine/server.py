"""The server's lifecycle, as a context manager.

- Started from an argv list in a new session (its own process group), stdin closed, output to a log
  file that becomes a trial artifact.
- Ready means ``/health`` answers 200 *and* the process is alive, before a monotonic deadline; a
  process that exits during boot fails fast with its classified reason and the tail of its log.
- Stopped with SIGTERM to the whole group, SIGKILL after a grace period, whatever happened.
- A guard process (``reaper``) kills the group if the worker itself dies, so a dead worker never
  leaves a server holding a GPU or host memory, and then deletes the server's API key file (a worker
  killed before its server was up never got to).
- A child that left the group (``setsid``) is found by the server's mark in its environment
  (``reaper.kill_marked``), killed at teardown too, and reported (``Server.detached``, a warning).
- The log never keeps what nova put into the server that is secret (``LaunchPlan.secret_values``: the
  API key, values expanded from the worker's environment, an inherited HF_TOKEN...): masked in the file
  in place once the server is up and when it stops, and in every tail read. It is capped at
  ``MAX_LOG_BYTES`` when the server stops (its head and its tail kept): the file is the trial's stored
  artifact.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from nova_search.engine.command import LaunchPlan
from nova_search.engine.reaper import kill_marked
from nova_search.errors import EngineError, TrialFailure
from nova_search.files import LOG_HEAD_BYTES, MAX_LOG_BYTES, cap_log

__all__ = ["LOG_HEAD_BYTES", "MAX_LOG_BYTES", "Server", "classify_failure", "free_port", "tail"]

log = logging.getLogger("nova_search")


#: log patterns -> classified reason, first match wins. A new, understood failure joins this table
#: (and, if it is a configuration rule, the compatibility table in search/rules.py).
FAILURE_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "oom",
        r"out of memory|OutOfMemoryError|less than desired (?:CPU|GPU) memory utilization"
        r"|No available memory for the cache blocks|Insufficient memory|not enough KV cache"
        r"|less than requested memory for kv"
        r"|Cannot allocate memory",
    ),
    (
        "unsupported",
        r"invalid choice|not supported|is not supported|requires .* (?:AVX|AMX|Arctic)"
        r"|is required for|NotImplementedError|is smaller than max_model_len"
        r"|ValueError|unrecognized arguments|No module named",
    ),
)


def classify_failure(log_text: str) -> str:
    for reason, pattern in FAILURE_PATTERNS:
        if re.search(pattern, log_text, flags=re.IGNORECASE):
            return reason
    return "crash"


#: an API key as nova makes them (``command.new_api_key``: 48 hex digits), wherever a log printed it
_API_KEY = re.compile(r"(?<![0-9A-Fa-f])[0-9a-f]{48}(?![0-9A-Fa-f])")


#: the secret values of the launches this process made, by their log file (``tail`` masks them whoever
#: reads the log: a trial that fails mid-level reads the tail before its server stops); the newest
#: LOG_SECRETS_KEPT logs
_LOG_SECRETS: dict[str, tuple[str, ...]] = {}
LOG_SECRETS_KEPT = 64


def _remember_secrets(path: Path, values: tuple[str, ...]) -> None:
    _LOG_SECRETS[os.path.abspath(path)] = values
    while len(_LOG_SECRETS) > LOG_SECRETS_KEPT:
        del _LOG_SECRETS[next(iter(_LOG_SECRETS))]


def tail(path: Path, max_bytes: int = 6000) -> str:
    """The last ``max_bytes`` of a server log, with anything shaped like a nova API key masked, and
    every secret value of the launch that writes it (``LaunchPlan.secret_values``): a tail may be read
    while the server still runs, before ``Server`` masked the file (vLLM 0.26 prints the key at
    start-up; an engine may print the token it was given), and it is stored on the trial and shown in
    the dashboard."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    for value in _LOG_SECRETS.get(os.path.abspath(path), ()):
        text = text.replace(value, "*" * len(value))
    return _API_KEY.sub(lambda m: "*" * len(m.group(0)), text)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Server:
    """``with Server(plan, log_path, ...) as server:`` boots, waits until ready, and always stops."""

    def __init__(
        self,
        plan: LaunchPlan,
        log_path: Path,
        *,
        boot_timeout_s: float,
        stop_timeout_s: float = 20.0,
        poll_interval_s: float = 0.5,
    ) -> None:
        self.plan = plan
        self.log_path = log_path
        self.boot_timeout_s = boot_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.poll_interval_s = poll_interval_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._guard_fd: int | None = None
        self.boot_s: float | None = None
        #: pids of the server's processes that had left its process group and were killed at teardown
        self.detached: tuple[int, ...] = ()

    @property
    def base_url(self) -> str:
        return f"http://{self.plan.host}:{self.plan.port}"

    @property
    def api_key(self) -> str:
        return self.plan.api_key

    def __enter__(self) -> Server:
        try:
            # start() inside the guard too: an interrupt (SIGTERM -> KeyboardInterrupt) that lands after
            # the server was spawned but before its reaper was would otherwise orphan it
            self.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        _remember_secrets(self.log_path, self._secret_values())
        self._write_key()
        env = dict(self.plan.env)  # the whole environment: nothing of the worker's beyond it (command.py)
        self._t0 = time.monotonic()
        # the log is this user's alone: vLLM 0.26 prints the API key it read from --config in it, which
        # nova masks once the server is up (``_mask_secrets``)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            try:
                self.proc = subprocess.Popen(
                    list(self.plan.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            except OSError as e:
                raise EngineError(f"cannot start the engine {self.plan.argv[0]!r}: {e.strerror}") from None
        if self.plan.cpus:
            # before the server has imported anything, so every process it starts inherits the mask
            try:
                os.sched_setaffinity(self.proc.pid, self.plan.cpus)
            except OSError as e:
                self.stop()
                raise EngineError(
                    f"engine.cpus {list(self.plan.cpus)}: cannot pin the server ({e.strerror})"
                ) from None
        read_fd, self._guard_fd = os.pipe()
        try:
            self._reaper = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "nova_search.engine.reaper",
                    str(self.proc.pid),
                    *([str(self.plan.key_file)] if self.plan.key_file is not None else []),
                ],
                stdin=read_fd,
                start_new_session=True,
                env={**os.environ, "NOVA_REAP_MARK": self.plan.mark},
            )
        finally:
            os.close(read_fd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self) -> None:
        assert self.proc is not None
        deadline = self._t0 + self.boot_timeout_s
        url = f"{self.base_url}/health"
        with httpx.Client(timeout=2.0) as client:
            while True:
                if not self.alive():
                    self._fail_boot(f"the server exited with code {self.proc.returncode} during boot")
                try:
                    if client.get(url).status_code == 200 and self.alive():
                        self.boot_s = time.monotonic() - self._t0
                        self._remove_key()  # read at start-up, needed no more
                        self._mask_secrets()
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    self._fail_boot(
                        f"the server was not ready within {self.boot_timeout_s:g} s", reason="timeout"
                    )
                time.sleep(self.poll_interval_s)

    def _fail_boot(self, message: str, reason: str | None = None) -> None:
        """Stop the server, then read its log's tail: stopping masks the API key in the log (vLLM 0.26
        prints it at start-up), so the tail that is stored and shown never holds it."""
        self.stop()  # let the log flush and every child go before reading the tail; masks the secrets
        log_tail = self.log_tail()
        raise TrialFailure(reason or classify_failure(log_tail), message, log_tail)

    def log_tail(self, max_bytes: int = 6000) -> str:
        """The tail of the server's log with every secret value of the launch masked
        (``LaunchPlan.secret_values``: the API key, an expanded HF_TOKEN...): in the file first
        (``_mask_secrets``), and in the text read, for a copy the server printed after that."""
        self._mask_secrets()
        text = tail(self.log_path, max_bytes)
        for value in self._secret_values():
            text = text.replace(value, "*" * len(value))
        return text

    def _secret_values(self) -> tuple[str, ...]:
        values = set(self.plan.secret_values)
        if self.plan.api_key:
            values.add(self.plan.api_key)
        return tuple(sorted(values, key=len, reverse=True))

    def _write_key(self) -> None:
        """The API key file, readable by this user only, created anew (never an existing file)."""
        path = self.plan.key_file
        if path is None:
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise EngineError(f"cannot write the server's API key file {path}: {e.strerror}") from None
        with os.fdopen(fd, "w") as f:
            f.write(self.plan.key_config())

    def _remove_key(self) -> None:
        if self.plan.key_file is not None:
            self.plan.key_file.unlink(missing_ok=True)

    def _mask_secrets(self) -> None:
        """Overwrite every copy of a secret value of the launch in the log with as many ``*`` (vLLM 0.26
        prints the API key among its "non-default args" at start-up; an engine may print the token it
        was given). In place, the length kept, so the server's appends go on."""
        values = [v.encode() for v in self._secret_values()]
        if not values:
            return
        try:
            data = self.log_path.read_bytes()
            fd = os.open(self.log_path, os.O_WRONLY)
        except OSError:
            return
        try:
            for value in values:
                at = data.find(value)
                while at >= 0:
                    os.pwrite(fd, b"*" * len(value), at)
                    at = data.find(value, at + len(value))
        finally:
            os.close(fd)

    def _cap_log(self) -> None:
        """Keep at most MAX_LOG_BYTES of the stopped server's log (``files.cap_log``)."""
        cap_log(self.log_path)

    def _kill_detached(self) -> None:
        """Kill (and report) the server's processes that left its process group: found by its mark."""
        if not self.plan.mark:
            return
        found = kill_marked(self.plan.mark)
        if found:
            self.detached = (*self.detached, *found)
            log.warning(
                "server on port %s: %d process(es) had left its process group (setsid) and were "
                "killed at teardown: pid %s",
                self.plan.port,
                len(found),
                ", ".join(map(str, found)),
            )

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after the grace period; the processes that left the group, by
        their mark; then release the guard (the log masked and capped)."""
        self._remove_key()
        if self.proc is not None:
            pgid = self.proc.pid
            for sig, wait_s in ((signal.SIGTERM, self.stop_timeout_s), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline:
                    self.proc.poll()
                    if not group_alive(pgid):
                        break
                    time.sleep(0.1)
                if not group_alive(pgid):
                    break
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._kill_detached()
        self._cap_log()  # first: masking then reads at most MAX_LOG_BYTES
        self._mask_secrets()
        if self._guard_fd is not None:
            os.close(self._guard_fd)
            self._guard_fd = None
        if self._reaper is not None:
            try:
                self._reaper.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
            self._reaper = None
