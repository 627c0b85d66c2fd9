"""Capacity at the SLO where a user looks: the capacity table (stock / tuned / best / each drafter), status
(text and JSON), the deploy answer's sentence, the report's section, the dashboard notes and the dump,
each validated against its shipped JSON Schema."""

from __future__ import annotations

import json
from datetime import datetime

import jsonschema

from nova_search.knobs import EngineConfig
from nova_search.measure.capacity import Capacity, Probe, SearchPlan
from nova_search.measure.slo import SLO, Bound, SLOCounts, judge
from nova_search.report.dashboard.notes import study_note_markdown, trial_note_markdown
from nova_search.report.data import build_report_data
from nova_search.report.html.render import render_html
from nova_search.report.policy import answer_lines
from nova_search.report.status import status_lines
from nova_search.results.capacity_table import capacity_rows
from nova_search.results.deploy import deploy_answer
from nova_search.results.schemas import load
from nova_search.results.serialize import study_dict
from nova_search.results.standing import status_output, study_status
from tests.support.builders import NGRAM_K3, level, study, trial

SLO_P99 = SLO((Bound("ttft", 99, 500.0),))
PLAN = SearchPlan("concurrency", 1.0, 1.0, 64.0, 0.1, 12)


def probe(load: float, met: int, energy: float | None = None) -> Probe:
    counts = SLOCounts(400, met, (met,), 400)
    return Probe(
        load, counts, judge(counts, SLO_P99), 10.0, load, load * 50, int(load * 500), energy_j=energy
    )


def capacity(knee: int, gpus: int = 1, straddle: bool = False) -> Capacity:
    if straddle:
        probes = (probe(1, 397),)  # 99.25 % met, [0.978, 0.997]: holds 0.99
    else:
        probes = (probe(knee, 400, energy=4000.0), probe(knee + 1, 100))
    return Capacity(SLO_P99, PLAN, probes, gpus, True, 2.0, "H100", "at $2 a GPU-hour", "GPU power (0)")


def capacity_study():
    levels = [level(1, 100), level(4, 300)]
    return study(
        trial(0, levels, role="stock", config=EngineConfig(), params={}, capacity=capacity(4)),
        trial(1, [level(1, 100), level(4, 350)], capacity=capacity(6)),  # the tuned baseline
        trial(2, levels, config={"speculative": NGRAM_K3}, capacity=capacity(16, gpus=2)),
        trial(
            3,
            levels,
            config={"speculative": NGRAM_K3 | {"num_speculative_tokens": 5}},
            capacity=capacity(0, straddle=True),
        ),
    )


def test_the_capacity_table_holds_stock_tuned_best_and_each_drafter():
    rows = {r.which: r for r in capacity_rows(capacity_study())}
    assert set(rows) == {"stock", "tuned", "best / drafter ngram"}
    assert rows["stock"].trial == "0" and rows["stock"].load == 4 and rows["stock"].capacity_rps_per_gpu == 4
    assert rows["tuned"].trial == "1" and rows["tuned"].load == 6
    best = rows["best / drafter ngram"]
    assert best.trial == "2" and best.capacity_rps == 16 and best.capacity_rps_per_gpu == 8  # per GPU: 2 GPUs
    assert best.cost_per_mtok == 2.0 * 2 / (16 * 50 * 3600) * 1e6
    assert best.joules_per_token == 4000.0 / (16 * 500)
    assert best.text.startswith("carries 8 req/s per GPU at p99 ttft <= 500 ms (concurrency 16")


def test_status_shows_capacity_cost_and_energy_and_its_json_validates():
    results = capacity_study()
    st = study_status(results, now=datetime(2026, 1, 1, 13, 0), alive=lambda host, pid: None)
    text = "\n".join(status_lines(st, now=datetime(2026, 1, 1, 13, 0)))
    assert "capacity at the SLO:" in text
    assert "  tuned (trial 1): carries 6 req/s per GPU at p99 ttft <= 500 ms" in text
    assert "/Mtok" in text and "J/token" in text
    payload = json.loads(status_output(st, deploy_answer(results)).model_dump_json())
    jsonschema.Draft202012Validator(load("status")).validate(payload)
    assert [c["which"] for c in payload["capacity"]] == ["stock", "tuned", "best / drafter ngram"]


def test_the_deploy_answer_says_what_the_config_carries():
    answer = deploy_answer(capacity_study())
    (r,) = answer.ranges
    assert r.configuration.trial == "1"
    assert r.configuration.capacity_text == (
        "this config carries 6 req/s per GPU at p99 ttft <= 500 ms (concurrency 6; concurrency 7 misses)"
    )
    assert any("this config carries 6 req/s per GPU" in line for line in answer_lines(answer))
    jsonschema.Draft202012Validator(load("deploy")).validate(answer.as_json())


def test_the_dump_holds_every_probe_and_validates():
    dump = study_dict(capacity_study())
    jsonschema.Draft202012Validator(load("dump")).validate(json.loads(json.dumps(dump)))
    cap = dump["trials"][2]["capacity"]
    assert cap["status"] == "found" and cap["search"]["unit"] == "concurrency"
    assert [p["verdict"] for p in cap["probe_windows"]] == ["meets", "misses"]
    assert dump["trials"][3]["capacity"]["status"] == "indeterminate"
    assert dump["trials"][3]["capacity"]["capacity_rps"] is None  # never a made-up number


def test_the_report_and_the_notes_show_the_capacity_table():
    results = capacity_study()
    html = render_html(build_report_data(results))
    assert "Capacity at the SLO" in html and "best / drafter ngram" in html
    note = study_note_markdown(results)
    assert "## Capacity at p99 ttft &lt;= 500 ms" in note or "## Capacity at p99 ttft <= 500 ms" in note
    assert "this config carries 6 req/s per GPU" in note  # the deploy answer opens the note
    trial_note = trial_note_markdown(results.trial(3))
    assert "### Capacity at the SLO" in trial_note and "capacity indeterminate" in trial_note
    assert "straddles" in trial_note
