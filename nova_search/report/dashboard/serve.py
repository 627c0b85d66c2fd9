"""Serving the dashboard (``nova-search dashboard``): optuna-dashboard's app over a study's storage,
with what nova changes in it.

``open_dashboard`` checks the storage and the artifacts folder (errors name the flag) and ``serve``
runs optuna-dashboard's app with the artifact store wired in, its constraints filled
(``show_named_constraints``) and its Analytics contour kept drawable, on the server
(``keep_analytics_drawable``) and in the browser (``drawable_bundle``, a patch of its script).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial

from nova_search.db import open_storage, storage_error, study_names
from nova_search.errors import NovaError, SpecError, StorageError
from nova_search.report.dashboard.publish import warn_once

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: the artifacts folder a worker uses when neither the spec nor --artifacts-dir names one
DEFAULT_ARTIFACTS_DIR = "nova-artifacts"


def open_dashboard(
    storage_url: str, artifacts_dir: str | None
) -> tuple[optuna.storages.RDBStorage, Any, Path | None]:
    """The storage (read as it is: Optuna's tables are never created) and the artifact store for
    optuna-dashboard: (storage, store or None, artifacts folder or None).

    ``artifacts_dir`` None: ``nova-artifacts`` when that folder exists, else no artifacts. Raises
    StorageError naming ``--storage``, SpecError naming ``--artifacts-dir``, NovaError without
    optuna-dashboard."""
    from nova_search.artifacts import filesystem_store

    if importlib.util.find_spec("optuna_dashboard") is None:
        raise NovaError("optuna-dashboard is not installed in this environment: pip install optuna-dashboard")
    try:
        storage = open_storage(storage_url, read_only=True)
        study_names(storage, storage_url)  # fails now, not on the first page load
    except Exception as e:  # noqa: BLE001 - storage_error keeps a driver's kind, never its message
        raise StorageError(f"--storage: {storage_error(storage_url, 'read', e)}") from None
    folder: Path | None
    if artifacts_dir is None:
        folder = Path(DEFAULT_ARTIFACTS_DIR) if Path(DEFAULT_ARTIFACTS_DIR).is_dir() else None
    else:
        folder = Path(artifacts_dir)
        if not folder.is_dir():
            raise SpecError(
                f"--artifacts-dir {artifacts_dir!r}: no such folder (give the folder the workers wrote to)"
            )
    return storage, (filesystem_store(folder) if folder is not None else None), folder


def show_named_constraints() -> bool:
    """Make this process's optuna-dashboard show Optuna 5's constraints; True when it does.

    optuna-dashboard 0.21 serializes a trial's constraints from the list ``system_attrs["constraints"]``
    (what Optuna 4's ``constraints_func`` wrote). Optuna 5's ``trial.set_constraint`` (what the worker
    calls) writes one ``constraints:<name>`` key per constraint instead, so the dashboard's API gives
    ``"constraints": []`` and its pages draw every trial as feasible. Its serializer is wrapped here to
    fill that list from ``FrozenTrial.constraints`` (Optuna's own reading of both forms), in the order
    Optuna gives them. Nothing is written to the study: writing the list form as well would make Optuna
    count each constraint twice (keys "0", "1"... and the names), which changes GPSampler's constraint
    models and makes it refuse a study whose older trials have only the named form ("The number of
    constraints must be the same for all trials"). The plain ``optuna-dashboard`` command still shows
    none; each trial's note lists its constraints by name either way.

    A private function of optuna-dashboard (pinned by tests/integration/test_dashboard.py, which reads
    the constraints back through the API): when it is not there, a warning and False."""
    try:
        from optuna_dashboard import _serializer

        original = _serializer.serialize_frozen_trial
    except (ImportError, AttributeError) as e:
        warn_once(f"optuna-dashboard will show no constraints (its serializer changed: {e})")
        return False
    if getattr(original, "nova_constraints", False):
        return True

    def serialize_frozen_trial(study_id: int, trial: FrozenTrial, study_system_attrs: dict[str, Any]) -> Any:
        out = original(study_id, trial, study_system_attrs)
        if not out.get("constraints") and trial.constraints:
            out["constraints"] = [float(v) for v in trial.constraints.values()]
        return out

    serialize_frozen_trial.nova_constraints = True  # type: ignore[attr-defined]
    _serializer.serialize_frozen_trial = serialize_frozen_trial
    return True


def drawable_contour(fig: go.Figure) -> go.Figure:
    """The figure without its contour traces when they hold no grid (``z`` None): Optuna's
    ``plot_contour`` gives such a trace, with a warning ("unique value length is less than 2"), while
    a parameter has fewer than two values among the COMPLETE trials, as in every nova study between
    its first and second trials with parameters (the stock trial has none: it runs vLLM's defaults).
    plotly.js throws on it (``TypeError: ... reading 'z'``) and optuna-dashboard 0.21's Analytics page
    goes blank. The markers stay; nothing else changes."""
    empty = [t for t in fig.data if t.type == "contour" and t.z is None]
    if empty:
        fig.data = tuple(t for t in fig.data if not (t.type == "contour" and t.z is None))
    return fig


def keep_analytics_drawable() -> bool:
    """Make this process's optuna-dashboard draw its Analytics contour through ``drawable_contour``;
    True when it does. optuna-dashboard 0.21 draws that page's plots on the server with
    ``optuna.visualization`` (looked up at each request): the wrapper is put there. Pinned by the
    browser test in tests/integration/test_dashboard.py."""
    import optuna.visualization as vis

    original = vis.plot_contour
    if getattr(original, "nova_drawable", False):
        return True

    def plot_contour(*args: Any, **kwargs: Any) -> go.Figure:
        return drawable_contour(original(*args, **kwargs))

    plot_contour.nova_drawable = True  # type: ignore[attr-defined]
    vis.plot_contour = plot_contour
    return True


#: optuna-dashboard 0.21's browser-side contour trace as its minified script spells it (GraphContour.tsx:
#: ``{type: "contour", x: xIndices, y: yIndices, z: zValues, colorscale: "Blues", connectgaps: true, ...}``)
_CONTOUR_TRACE = re.compile(
    rb'\{type:"contour",(?=x:[\w$]+,y:[\w$]+,z:([\w$]+),colorscale:"Blues",connectgaps:!0,)'
)


def drawable_bundle(script: bytes) -> bytes | None:
    """optuna-dashboard's browser script with its contour trace shown only while its grid holds at
    least two distinct values; None when the script does not hold exactly one such trace (another
    release: it is served as it is).

    The Analytics page's default contour (drawn in the browser) fills a grid over the first two
    parameters, one cell per choice, from the COMPLETE trials. While they all sit in one cell (the
    stock trial has no parameters, so a nova study with one other COMPLETE trial is there) the grid
    holds one value, ``connectgaps`` spreads it, plotly.js's automatic contour levels span a zero
    range and, for some values (378.7022069724787, not 378.70), it throws ``TypeError: Cannot read
    properties of undefined (reading 'z')``: the page goes blank. A trace with ``visible: false`` is
    not computed, so the page keeps its markers and draws the contour from the second distinct value
    on. Nothing else in the script changes."""
    patched, found = _CONTOUR_TRACE.subn(
        lambda m: m[0] + b"visible:new Set([].concat(..." + m[1] + b").filter(v=>v!=null)).size>1,", script
    )
    return patched if found == 1 else None


def _serve_drawable_bundle(app: Any) -> bool:
    """Route ``/static/bundle.js`` of optuna-dashboard's app (a bottle app: a fixed route is matched
    before its ``/static/<filename:path>``) to ``drawable_bundle``'s script, gzipped when the browser
    takes it; True when it does. When the script is not the one expected, a warning and False."""
    import bottle
    import optuna_dashboard

    source = Path(optuna_dashboard.__file__).parent / "public" / "bundle.js"
    try:
        script = drawable_bundle(source.read_bytes())
    except OSError as e:
        script, why = None, f"cannot read {source.name} ({e.strerror or e})"
    else:
        why = "its script is not the one this was written for"
    if script is None:
        warn_once(f"optuna-dashboard's Analytics contour is served as it is: {why}")
        return False
    packed = gzip.compress(script, mtime=0)
    tag = '"' + hashlib.sha256(script).hexdigest()[:32] + '"'

    @app.get("/static/bundle.js")
    def bundle() -> bytes:
        bottle.response.content_type = "text/javascript"
        bottle.response.set_header("ETag", tag)
        bottle.response.set_header("Cache-Control", "no-cache")
        bottle.response.set_header("Vary", "Accept-Encoding")
        if "gzip" in bottle.request.headers.get("Accept-Encoding", ""):
            bottle.response.set_header("Content-Encoding", "gzip")
            return packed
        return script

    return True


def serve(storage: Any, artifact_store: Any, host: str, port: int) -> None:
    """optuna-dashboard (its ``wsgi`` app, run as ``run_server`` runs it) on host:port until
    interrupted, showing Optuna 5's constraints (``show_named_constraints``) and keeping its Analytics
    page drawable (``keep_analytics_drawable`` on the server, ``drawable_bundle`` in the browser).
    Raises NovaError when the address cannot be bound."""
    import bottle
    from optuna_dashboard import wsgi

    show_named_constraints()
    keep_analytics_drawable()
    app = wsgi(storage, artifact_store=artifact_store)
    _serve_drawable_bundle(app)
    try:
        bottle.run(app, host=host, port=port)
    except OSError as e:
        raise NovaError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
