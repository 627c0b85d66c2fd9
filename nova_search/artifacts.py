"""A trial's files, kept as Optuna artifacts (``optuna.artifacts``), which optuna-dashboard lists
on the trial and serves for download.

- ``requests.jsonl``: one line per measured request (warmups excluded): ``level``, ``repeat`` (the
  window), ``send_s`` (seconds from the start of the trial's first window, monotonic clock),
  ``ttft_ms``, ``e2e_ms`` (null when no output token arrived), ``prompt_tokens``, ``output_tokens``,
  ``success``, ``error`` (empty when it succeeded), ``status`` (HTTP status, when one came back).
  Written window by window while the trial measures, so a crash keeps what was measured.
- ``server.log``: the engine's own log (``engine.Server`` writes it).

The store is a ``FileSystemArtifactStore`` on the artifacts folder (``artifacts_dir`` of the spec,
or ``--artifacts-dir``); artifacts are files named by their id there, next to the per-trial folders.
Uploads attach to the RUNNING trial (Optuna refuses attributes on a finished one), so
``trial.run.run_trial`` uploads before the trial is told. An upload that fails is logged and skipped:
it never costs a measurement.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.artifacts import FileSystemArtifactStore, upload_artifact

from nova_search.files import cap_log
from nova_search.measure.records import RequestRecord

if TYPE_CHECKING:
    from optuna.artifacts._protocol import ArtifactStore

log = logging.getLogger("nova_search")

REQUESTS_FILE = "requests.jsonl"
#: mimetypes the dashboard sends with each download
MIMETYPES = {".jsonl": "application/x-ndjson", ".log": "text/plain"}


def filesystem_store(root: str | Path) -> FileSystemArtifactStore:
    """Optuna's file-system artifact store on ``root`` (created when missing)."""
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(path)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def request_rows(
    records: Iterable[RequestRecord], *, level: int, repeat: int, origin: float, probe: float | None = None
) -> list[dict[str, Any]]:
    """One JSON-ready row per request; ``origin`` is the ``perf_counter`` time ``send_s`` counts from;
    ``probe``: the load of the capacity search's window the requests belong to (``capacity_load``)."""
    return [
        {
            **({"capacity_load": probe} if probe is not None else {}),
            "level": level,
            "repeat": repeat,
            "send_s": round(r.send_time - origin, 6),
            "ttft_ms": _ms(r.ttft),
            "e2e_ms": _ms(r.e2e),
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "success": r.success,
            "error": r.error,
            "status": r.status_code,
        }
        for r in sorted(records, key=lambda r: r.send_time)
    ]


def append_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> bool:
    """Append rows to a JSONL file. Never raises: a file that cannot be written is logged (False)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
        return True
    except OSError as e:
        log.warning("request records not written to %s: %s", path, e)
        return False


def upload_files(trial: optuna.Trial, store: ArtifactStore, paths: Sequence[Path]) -> dict[str, str]:
    """Upload each existing file to ``store`` as an artifact of ``trial``: file name -> artifact id. A
    log over ``files.MAX_LOG_BYTES`` (a server still running as the slot's leader, not yet capped)
    goes up capped, its head and tail. Never raises; a file that cannot be uploaded is logged and left
    out."""
    out: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            continue
        # the capped copy keeps the file's name: the artifact is named after it
        capped = path.parent / ".nova-upload" / path.name
        source = path
        if path.suffix == ".log":
            try:
                capped.parent.mkdir(exist_ok=True)
                source = capped if cap_log(path, capped) else path
            except OSError:
                pass  # uploaded whole
        try:
            out[path.name] = upload_artifact(
                artifact_store=store,
                file_path=str(source),
                study_or_trial=trial,
                mimetype=MIMETYPES.get(path.suffix),
            )
        except Exception as e:  # noqa: BLE001 - an artifact is never worth a measurement
            log.warning(
                "artifact %s of trial %s was not uploaded: %s: %s",
                path.name,
                trial.number,
                type(e).__name__,
                e,
            )
        finally:
            if source is capped:
                capped.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                capped.parent.rmdir()  # when empty
    return out
