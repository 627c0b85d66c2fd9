"""optuna-dashboard as an engineer uses it: a study run by `nova-search worker` (the fast stand-in
engine, nova_search/testing/fake_engine.py, launched exactly as vLLM is), then `nova-search dashboard` as a
subprocess, read through its HTTP API and rendered by headless Chromium.

The real-engine counterpart (a real trial gets its note and artifacts) is in test_study_engine.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import optuna
import pytest

from nova_search import schema
from nova_search.errors import ExitCode
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict
from tests.support.cli import nova
from tests.support.dashboard import serve_dashboard, study_detail

METRICS = ["output_throughput@best", "ttft_p99_ms@4"]
LEVELS, REQUESTS = (1, 4), 6


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A SQLite study of five trials run by the real worker: the stock baseline and an n-gram trial
    (COMPLETE), a configuration the engine refuses at boot (PRUNED, "unsupported"), one the
    compatibility table refuses (PRUNED, never launched, so not counted in the budget of four
    measurements), a second n-gram trial (COMPLETE). The two refused ones are infeasible (the
    ``launchable`` constraint, Optuna 5's set_constraint)."""
    tmp = tmp_path_factory.mktemp("dash")
    raw = minimal_spec_dict(
        name="dash",
        space={
            "max_model_len": 2048,
            "max_num_seqs": {"low": 1, "high": 64, "log": True},
            "enable_prefix_caching": {"choices": [True, False]},
            "enable_chunked_prefill": {"choices": [True, False]},
            "max_num_batched_tokens": {"low": 256, "high": 4096, "log": True},
            "speculative": {"method": {"choices": ["none", "ngram"]}, "num_speculative_tokens": 3},
        },
        workload={"input_len": 16, "output_len": 16},
        sweep={"concurrency": list(LEVELS), "warmup_requests": 1, "requests": REQUESTS},
        objectives=[
            {"metric": "output_throughput", "direction": "maximize"},
            {"metric": "ttft_p99_ms", "direction": "minimize", "at": 4},
        ],
        budget={"n_trials": 4},
    )
    raw["engine"]["env"] = {"FAKE_ENGINE_REFUSE": "--no-enable-prefix-caching"}
    url = f"sqlite:///{tmp}/study.db"
    study = nova_study.create(parse_spec(raw), url, "dash")
    base = {"max_num_seqs": 8, "enable_chunked_prefill": True, "max_num_batched_tokens": 1024}
    study.enqueue_trial(
        {**base, "enable_prefix_caching": True, "spec_method": "ngram", "num_speculative_tokens": 3}
    )
    study.enqueue_trial({**base, "enable_prefix_caching": False, "spec_method": "none"})
    study.enqueue_trial(
        {
            **base,
            "enable_prefix_caching": True,
            "enable_chunked_prefill": False,
            "max_num_batched_tokens": 512,
        }
    )
    study.enqueue_trial(
        {**base, "max_num_seqs": 16, "enable_prefix_caching": True, "spec_method": "ngram",
         "num_speculative_tokens": 3}
    )  # fmt: skip
    artifacts = tmp / "artifacts"
    r = nova("worker", "dash", "--storage", url, "--artifacts-dir", str(artifacts))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return url, artifacts


@pytest.fixture(scope="module")
def dashboard(populated):
    """`nova-search dashboard` on a free loopback port; its base URL."""
    url, artifacts = populated
    with serve_dashboard(url, artifacts) as base:
        yield base


@pytest.fixture(scope="module")
def detail(dashboard):
    return study_detail(dashboard, "dash")


def test_metric_names_and_trial_states(detail):
    _, body = detail
    assert body["objective_names"] == METRICS
    assert [t["state"] for t in body["trials"]] == ["Complete", "Complete", "Pruned", "Pruned", "Complete"]
    for t in body["trials"]:
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert 0 < len(attrs[schema.SUMMARY.key]) <= 200, attrs
    fail = {a["key"]: a["value"] for a in body["trials"][2]["user_attrs"]}
    assert fail[schema.SUMMARY.key].startswith(fail[schema.REASON.key] + ":")


def test_every_finished_trial_has_its_note(detail):
    _, body = detail
    stock, ngram, fail, pruned, _ = (t["note"]["body"] for t in body["trials"])
    assert stock.startswith("## Trial 0: COMPLETE (stock)")
    header = next(ln for ln in ngram.splitlines() if ln.startswith("| concurrency"))
    assert "TTFT p99 ms" in header and header.endswith("| acceptance |")  # n-gram: acceptance shown
    rows = [ln for ln in ngram.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [r.split(" | ")[0] for r in rows] == [f"| {c}" for c in LEVELS]
    assert f"0/{REQUESTS}" in rows[0]
    assert "```bash\n" in ngram and "nova_search.testing.fake_engine" in ngram
    assert "--speculative-config" in ngram
    assert "### Why it ended PRUNED" in fail and "**unsupported**" in fail
    assert "fake engine refuses --no-enable-prefix-caching" in fail  # the end of its server log
    assert "### Why it ended PRUNED" in pruned and "**incompatible**" in pruned


def test_study_note_and_graphs(detail):
    _, body = detail
    note = body["note"]["body"]
    assert note.startswith("# dash\n") and "5 trials: 3 COMPLETE, 2 PRUNED" in note
    # the only non-speculative trial is stock: it is the tuned baseline (never the n-gram trial)
    assert "stock: trial 0 · tuned: trial 0" in note
    graphs = {g["id"]: json.loads(g["graph_object"]) for g in body["plotly_graph_objects"]}
    assert set(graphs) == {"nova-throughput", "nova-latency", "nova-acceptance", "nova-user-gpu"}
    names = [t["name"] for t in graphs["nova-throughput"]["data"]]
    assert names == ["stock = tuned (trial 0)"]
    assert graphs["nova-throughput"]["data"][0]["x"] == [str(c) for c in LEVELS]
    assert all(y > 0 for t in graphs["nova-throughput"]["data"] for y in t["y"])
    assert [a["text"] for a in graphs["nova-latency"]["layout"]["annotations"]] == [
        "TTFT p99 (ms)",
        "TPOT p99 (ms)",
    ]
    assert [t["name"] for t in graphs["nova-acceptance"]["data"]] == [
        "trial 1 (ngram/k3)",
        "trial 4 (ngram/k3)",
    ]
    # every axis is titled, with its unit
    layouts = {k: g["layout"] for k, g in graphs.items()}
    assert layouts["nova-throughput"]["yaxis"]["title"]["text"] == "output tok/s (per server)"
    assert [layouts["nova-latency"][a]["title"]["text"] for a in ("yaxis", "yaxis2")] == [
        "TTFT p99 (ms)",
        "TPOT p99 (ms)",
    ]
    for k, layout in layouts.items():
        for axis in [a for a in layout if a.startswith(("xaxis", "yaxis"))]:
            assert layout[axis]["title"]["text"], (k, axis)
    assert layouts["nova-throughput"]["xaxis"]["title"]["text"] == "concurrency (requests in flight)"


def test_per_user_per_gpu_graph(populated, detail):
    """One point per COMPLETE trial and level: tok/s per user = tok/s / concurrency, per GPU = tok/s / 1
    (one GPU each); the front is the feasible points nothing beats on both axes."""
    _, body = detail
    graph = next(
        json.loads(g["graph_object"]) for g in body["plotly_graph_objects"] if g["id"] == "nova-user-gpu"
    )
    assert graph["layout"]["xaxis"]["title"]["text"].startswith("output tok/s per user")
    assert graph["layout"]["yaxis"]["title"]["text"].startswith("output tok/s per GPU")
    points = {
        (txt.split(" ")[1], int(txt.split("concurrency ")[1].split(",")[0])): (x, y)
        for t in graph["data"]
        for txt, x, y in zip(t["text"], t["x"], t["y"], strict=True)
        if t["name"] != "Pareto front"
    } | {
        (txt.split(" ")[1], int(txt.split("concurrency ")[1].split(",")[0])): (x, y)
        for t in graph["data"]
        if t["name"] == "Pareto front"
        for txt, x, y in zip(t["text"], t["x"], t["y"], strict=True)
    }
    assert set(points) == {(k, c) for k in ("0", "1", "4") for c in LEVELS}
    study = optuna.load_study(study_name="dash", storage=populated[0])
    for t in study.get_trials(states=[optuna.trial.TrialState.COMPLETE]):
        for lv in schema.LEVELS.read(t.user_attrs):
            x, y = points[(str(t.number), lv.concurrency)]
            assert x == pytest.approx(lv.output_throughput / lv.concurrency)
            assert y == pytest.approx(lv.output_throughput)
    front = next(t for t in graph["data"] if t["name"] == "Pareto front")
    on = list(zip(front["x"], front["y"], strict=True))
    assert on and all(
        not any(x2 >= x and y2 >= y and (x2, y2) != (x, y) for x2, y2 in points.values()) for x, y in on
    )


def test_constraints_through_the_dashboard_api(detail):
    """optuna-dashboard 0.21 reads the list form of the constraints; `nova-search dashboard` gives it
    Optuna 5's named ones: the refused configurations are infeasible in its API and pages."""
    _, body = detail
    assert [t["constraints"] for t in body["trials"]] == [[], [], [1.0], [1.0], []]
    for t in body["trials"][2:4]:
        assert "### Constraints: INFEASIBLE (1 broken)" in t["note"]["body"]
        assert "| launchable | 1 | **no** |" in t["note"]["body"]


def test_artifacts_download_through_the_dashboard(dashboard, detail):
    study_id, body = detail
    for t in body["trials"][:2]:
        files = {a["filename"]: a for a in t["artifacts"]}
        assert set(files) == {"requests.jsonl", "server.log"}
        r = httpx.get(
            f"{dashboard}/artifacts/{study_id}/{t['trial_id']}/{files['requests.jsonl']['artifact_id']}",
            timeout=30,
        )
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(x) for x in r.text.splitlines()]
        assert len(lines) == len(LEVELS) * REQUESTS  # measured requests only, warmups excluded
        assert [x["level"] for x in lines] == [c for c in LEVELS for _ in range(REQUESTS)]
        assert all(x["success"] and x["ttft_ms"] > 0 and x["e2e_ms"] >= x["ttft_ms"] for x in lines)
        assert all(x["output_tokens"] == 16 and x["error"] == "" and x["repeat"] == 0 for x in lines)
        assert [x["send_s"] for x in lines] == sorted(x["send_s"] for x in lines) and 0 <= lines[0][
            "send_s"
        ] < 1
    fail = {a["filename"]: a for a in body["trials"][2]["artifacts"]}
    assert set(fail) == {"server.log"}  # it never measured
    log = httpx.get(
        f"{dashboard}/artifacts/{study_id}/{body['trials'][2]['trial_id']}/{fail['server.log']['artifact_id']}"
    )
    assert "fake engine refuses --no-enable-prefix-caching" in log.text
    assert body["trials"][3]["artifacts"] == []  # never launched


def chromium() -> str:
    """Chromium's path. Missing: a failure as root (the test command installs it then, as in CI),
    else skipped, saying why (nothing else needs root)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.geteuid() == 0:
            pytest.fail(
                "chromium is missing: `scripts/test.sh --all` installs it as root (apt-get install chromium)"
            )
        pytest.skip(
            "chromium is not installed and this user cannot install it (not root): apt-get install chromium"
        )
    return path


@pytest.mark.browser
def test_study_page_renders_in_chromium(dashboard, detail, tmp_path):
    study_id, _ = detail
    page = f"{dashboard}/dashboard/studies/{study_id}"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,3200",
             "--virtual-time-budget=15000"]  # fmt: skip
    dom = subprocess.run(
        [chromium(), *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    for name in METRICS:
        assert name in dom.stdout, f"{name} not on the rendered study page"
    assert "Output throughput vs concurrency" in dom.stdout  # our graph, drawn by plotly in the page
    shot = tmp_path / "study-page.png"
    r = subprocess.run([chromium(), *flags, f"--screenshot={shot}", page], capture_output=True, timeout=120)
    assert (
        r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    )
    print(f"screenshot of the study page: {shot}")


@pytest.mark.browser
def test_analytics_page_renders_in_chromium(dashboard, detail):
    """The Analytics page draws its plots and logs no uncaught error (chromium logs the page's console
    at --log-level=0). It went blank with `Cannot read properties of undefined (reading 'z')` on a study
    whose only trial with parameters besides the stock one (which has none) is alone in the contour
    plot: see docs/deploy/dashboard.md. This study has two such trials."""
    study_id, _ = detail
    dom, console = _analytics_console(dashboard, study_id)
    assert not [ln for ln in console if "Uncaught" in ln or "TypeError" in ln], console
    assert "Hyperparameter Relationships" in dom
    assert dom.count("js-plotly-plot") >= 3, "the Analytics plots were not drawn"


def _analytics_console(base: str, study_id: int) -> tuple[str, list[str]]:
    """The Analytics page as headless Chromium renders it, and the page's console lines."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,2000",
             "--virtual-time-budget=15000", "--enable-logging=stderr", "--log-level=0"]  # fmt: skip
    page = f"{base}/dashboard/studies/{study_id}/analytics"
    dom = subprocess.run(
        [chromium(), *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout, [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]


@pytest.mark.browser
def test_analytics_page_with_the_stock_trial_and_one_other(tmp_path):
    """The shape every nova study passes through: the stock trial (vLLM's defaults, no parameters)
    and one COMPLETE trial with categorical parameters, at a value that makes plotly.js throw in
    optuna-dashboard 0.21's browser-side contour (a 2x2 grid holding one value). `nova-search dashboard`
    serves its script with that contour hidden until the grid holds two distinct values
    (report.dashboard.drawable_bundle); served as it is, this page logged "Uncaught TypeError: Cannot
    read properties of undefined (reading 'z')" and went blank. Its server-side contour (the "python"
    plot backend of its settings) gave a trace without a grid here too: drawable_contour drops it."""
    categorical = optuna.distributions.CategoricalDistribution
    dists = {
        "enable_chunked_prefill": categorical((True, False)),
        "enable_prefix_caching": categorical((True, False)),
    }
    url = f"sqlite:///{tmp_path}/shape.db"
    study = optuna.create_study(storage=url, study_name="shape", directions=["maximize", "minimize"])
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, values=[58.9, 239.5]))
    study.add_trial(
        optuna.trial.create_trial(
            params={"enable_chunked_prefill": True, "enable_prefix_caching": True},
            distributions=dists,
            values=[378.7022069724787, 183.42148319087434],
        )
    )
    with serve_dashboard(url, tmp_path) as base:
        study_id, _ = study_detail(base, "shape")
        dom, console = _analytics_console(base, study_id)
        plain = httpx.get(f"{base}/static/bundle.js", headers={"Accept-Encoding": "identity"}, timeout=30)
        packed = httpx.get(f"{base}/static/bundle.js", headers={"Accept-Encoding": "gzip"}, timeout=30)
    assert not [ln for ln in console if "Uncaught" in ln], console
    assert dom.count("js-plotly-plot") >= 3
    assert 'id="graph-contour"' in dom  # the contour's own plot is there, its markers drawn
    assert plain.status_code == packed.status_code == 200
    assert packed.headers["content-encoding"] == "gzip" and packed.content == plain.content  # httpx unpacks
    assert plain.content.count(b"visible:new Set([].concat(...") == 1


def test_bad_flags_are_one_line_naming_the_flag(populated):
    url, _ = populated
    r = nova("dashboard", "--storage", "postgresql+psycopg://nova:hunter2@127.0.0.1:1/x", "--port", "1")
    assert r.returncode == ExitCode.STORAGE and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: --storage:") and "hunter2" not in r.stderr and "***" in r.stderr
    r = nova("dashboard", "--storage", "sqlite:///" + str(Path("/nonexistent/nova.db")))
    assert r.returncode == ExitCode.STORAGE and "--storage" in r.stderr
    assert "no such database file" in r.stderr
    r = nova("dashboard", "--storage", url, "--artifacts-dir", "/nonexistent/artifacts")
    assert r.returncode == 2 and r.stderr.startswith("error: --artifacts-dir") and r.stderr.count("\n") == 1
