"""The stored schema: every key nova-search writes into Optuna's storage, with its typed encode/decode.

Optuna stores JSON. A worker writes typed records through these attributes (``CONFIG.write(trial,
config)``) and every reader decodes them back (``CONFIG.read(trial.user_attrs)`` is an
``EngineConfig``), so a key and its format are defined here and nowhere else. A record that is
missing, or malformed (written by another version), reads as ``None``: readers never crash on a
stored study.

Trial user attributes (``nova:*``)::

    role              stock | reference | tuned (a baseline), absent for a searched trial
    config            EngineConfig                 argv              the launch argv (no secrets)
    levels            LevelResult per level        repeats           each window's headline metrics
    intervals         median CIs per level         saturation        where the sweep saturates
    reference_outputs greedy outputs (equivalence) warnings          e.g. a client-bound level
    timing            boot_s, measure_s, total_s   engine_version    the server's /version
    worker            host and GPUs                summary           one line for the trial table
    reason, message   why it ended FAIL/PRUNED     log_tail          the end of the server log
    server_log        the log's path on the worker
    paired            windows measured again against the leader (confirm): per level, both sides
    deploy_argv       the deployable ``vllm serve`` argv (no API key file, host or port)
    capacity          the capacity search at the SLO (``measure.capacity.Capacity``): its probes, the
                      capacity per GPU, cost and energy; written after each probe

Study user attributes: ``spec`` (the validated spec, secrets redacted), ``stage``, ``parent`` and
``base`` (a staged study's links, see ``study``), ``deploy`` (the deploy answer as JSON, with its
``schema_version``: ``results.deploy``; on every stage's study of a staged one, for scripts that read
it with Optuna alone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from nova_search.knobs import EngineConfig
from nova_search.measure.capacity import Capacity
from nova_search.measure.metrics import LevelResult
from nova_search.measure.records import Paired, ReferenceOutputs

T = TypeVar("T")

PREFIX = "nova:"
#: Optuna's own system attribute on a trial that re-runs a failed one (RetryFailedTrialCallback)
RETRY_OF = "failed_trial"
#: the role of a trial that is not a baseline
SEARCH_ROLE = "search"


class HasUserAttrs(Protocol):
    def set_user_attr(self, key: str, value: Any) -> None: ...


@dataclass(frozen=True)
class Attr(Generic[T]):
    """One stored attribute: its key and how its value is encoded to JSON and decoded back."""

    key: str
    encode: Callable[[T], Any]
    decode: Callable[[Any], T]

    def read(self, attrs: Mapping[str, Any]) -> T | None:
        """The decoded value, None when it is absent or malformed."""
        raw = attrs.get(self.key)
        if raw is None:
            return None
        try:
            return self.decode(raw)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def write(self, target: HasUserAttrs, value: T) -> None:
        target.set_user_attr(self.key, self.encode(value))

    def item(self, value: T) -> dict[str, Any]:
        """``{key: encoded value}``, for ``enqueue_trial(user_attrs=...)``."""
        return {self.key: self.encode(value)}


def _same(v: Any) -> Any:
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("expected a string")
    return v


def _floats(v: Any) -> dict[str, float]:
    if not isinstance(v, dict):
        raise TypeError("expected a mapping")
    out = {}
    for k, x in v.items():
        if isinstance(x, int | float) and not isinstance(x, bool):
            out[str(k)] = float(x)
    return out


def _mapping(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise TypeError("expected a mapping")
    return v


def _texts(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list | tuple):
        raise TypeError("expected a list")
    return tuple(str(x) for x in v)


def _levels(v: Any) -> tuple[LevelResult, ...]:
    if not isinstance(v, list):
        raise TypeError("expected a list")
    return tuple(
        sorted((LevelResult.from_dict(d) for d in v if isinstance(d, dict)), key=lambda lv: lv.concurrency)
    )


def _encode_windows(v: Mapping[int, Any]) -> dict[str, Any]:
    return {str(c): [dict(w) for w in ws] for c, ws in v.items()}


def _decode_windows(v: Any) -> dict[int, tuple[dict[str, float], ...]]:
    """``{level: [{metric: value}, ...]}`` -> every metric of each window, per level."""
    out: dict[int, tuple[dict[str, float], ...]] = {}
    for level, windows in _mapping(v).items():
        try:
            c = int(level)
        except (TypeError, ValueError):
            continue
        if isinstance(windows, list):
            out[c] = tuple(_floats(w) for w in windows if isinstance(w, dict))
    return out


def encode_reference(r: ReferenceOutputs) -> dict[str, Any]:
    return {"token_ids": [list(ids) for ids in r.token_ids], "errors": list(r.errors)}


def decode_reference(d: Any) -> ReferenceOutputs:
    ids = tuple(tuple(int(x) for x in row) for row in d["token_ids"])
    errors = tuple(str(e) for e in d.get("errors") or [""] * len(ids))
    if len(errors) != len(ids):
        raise ValueError("token_ids and errors differ in length")
    return ReferenceOutputs(ids, errors)


@dataclass(frozen=True)
class WorkerTag:
    """Where a trial ran: the worker's host, the GPUs its server was given, and the worker's process id
    (None in trials recorded before it was kept): host and pid tell two workers of one host apart."""

    host: str
    gpus: tuple[int, ...] = ()
    pid: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"host": self.host, "gpus": list(self.gpus)}
        if self.pid is not None:
            d["pid"] = self.pid
        return d

    @classmethod
    def from_dict(cls, d: Any) -> WorkerTag:
        d = _mapping(d)
        gpus = tuple(int(g) for g in d.get("gpus") or () if isinstance(g, int) and not isinstance(g, bool))
        pid = d.get("pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
        return cls(str(d.get("host") or "unknown host"), gpus, pid)


@dataclass(frozen=True)
class StageBase:
    """On a speculative stage: the tuned trial it builds on (``study``/``number`` None when the spec
    gave the tuned configuration), its configuration and its objective values."""

    config: EngineConfig
    study: str | None = None
    number: int | None = None
    values: tuple[float, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "number": self.number,
            "config": self.config.as_dict(),
            "values": list(self.values),
        }

    @classmethod
    def from_dict(cls, d: Any) -> StageBase:
        d = _mapping(d)
        number = d.get("number")
        return cls(
            config=EngineConfig.from_dict(_mapping(d["config"])),
            study=d.get("study"),
            number=int(number) if isinstance(number, int) else None,
            values=tuple(float(v) for v in d.get("values") or ()),
        )


def _attr(name: str, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> Attr[Any]:
    return Attr(PREFIX + name, encode, decode)


# ---------------------------------------------------------------- trial attributes

ROLE: Attr[str] = _attr("role", _same, _text)
CONFIG: Attr[EngineConfig] = _attr(
    "config", EngineConfig.as_dict, lambda v: EngineConfig.from_dict(_mapping(v))
)
ARGV: Attr[tuple[str, ...]] = _attr("argv", list, _texts)
LEVELS: Attr[tuple[LevelResult, ...]] = _attr("levels", lambda lvs: [lv.as_dict() for lv in lvs], _levels)
REPEATS: Attr[dict[int, tuple[dict[str, float], ...]]] = _attr("repeats", _encode_windows, _decode_windows)
INTERVALS: Attr[dict[str, Any]] = _attr("intervals", _same, _mapping)
SATURATION: Attr[dict[str, Any]] = _attr("saturation", _same, _mapping)
REFERENCE: Attr[ReferenceOutputs] = _attr("reference_outputs", encode_reference, decode_reference)
WARNINGS: Attr[tuple[str, ...]] = _attr("warnings", list, _texts)
TIMING: Attr[dict[str, float]] = _attr("timing", dict, _floats)
ENGINE_VERSION: Attr[str] = _attr("engine_version", _same, lambda v: str(v))
WORKER: Attr[WorkerTag] = _attr("worker", WorkerTag.as_dict, WorkerTag.from_dict)
SUMMARY: Attr[str] = _attr("summary", _same, _text)
REASON: Attr[str] = _attr("reason", _same, _text)
MESSAGE: Attr[str] = _attr("message", _same, _text)
LOG_TAIL: Attr[str] = _attr("log_tail", _same, _text)
SERVER_LOG: Attr[str] = _attr("server_log", _same, _text)
PAIRED: Attr[Paired] = _attr("paired", Paired.as_dict, lambda v: Paired.from_dict(_mapping(v)))
DEPLOY_ARGV: Attr[tuple[str, ...]] = _attr("deploy_argv", list, _texts)
CAPACITY: Attr[Capacity] = _attr("capacity", Capacity.as_dict, lambda v: Capacity.from_dict(_mapping(v)))

# ---------------------------------------------------------------- study attributes

SPEC: Attr[dict[str, Any]] = _attr("spec", _same, _mapping)
STAGE: Attr[str] = _attr("stage", _same, _text)
PARENT: Attr[str] = _attr("parent", _same, _text)
BASE: Attr[StageBase] = _attr("base", StageBase.as_dict, StageBase.from_dict)
#: the deploy answer's JSON (``results.deploy.DeployAnswer``, versioned by its own ``schema_version``)
DEPLOY: Attr[dict[str, Any]] = _attr("deploy", _same, _mapping)
#: a trace workload's summary, read at ``create`` (``loadgen.trace.trace_summary``): the report's histograms
TRACE: Attr[dict[str, Any]] = _attr("trace", _same, _mapping)

TRIAL_ATTRS: tuple[Attr[Any], ...] = (
    ROLE, CONFIG, ARGV, LEVELS, REPEATS, INTERVALS, SATURATION, REFERENCE, WARNINGS, TIMING,
    ENGINE_VERSION, WORKER, SUMMARY, REASON, MESSAGE, LOG_TAIL, SERVER_LOG, PAIRED, DEPLOY_ARGV, CAPACITY,
)  # fmt: skip
STUDY_ATTRS: tuple[Attr[Any], ...] = (SPEC, STAGE, PARENT, BASE, DEPLOY, TRACE)
#: a study *system* attribute (beside optuna-dashboard's notes): the numbers of the trials whose
#: dashboard notes are written (``report.dashboard.publish.after_trial``)
NOTED: Attr[tuple[int, ...]] = _attr("dashboard:noted", list, lambda v: tuple(int(x) for x in v))


def role_of(attrs: Mapping[str, Any]) -> str:
    """A trial's role: its baseline role, else ``search``."""
    return ROLE.read(attrs) or SEARCH_ROLE


def stage_of(attrs: Mapping[str, Any]) -> str:
    """A study's stage (``tune``, ``speculative``), ``joint`` for an unstaged study."""
    return STAGE.read(attrs) or "joint"
