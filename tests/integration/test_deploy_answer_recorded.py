"""The deploy answer agrees everywhere on every recorded study (benchmarks/results/*/study.db): the
report's first section, the study note, ``policy --format json``, the end of ``status``, and ``export``
at each range, all against ``results.deploy.deploy_answer``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import optuna
import pytest

from nova_search.report.dashboard.notes import study_note_markdown
from nova_search.report.data import build_report_data
from nova_search.report.html.render import render_html
from nova_search.results.deploy import DEPLOY_SCHEMA_VERSION, deploy_answer
from nova_search.results.load import load_results
from tests.support import REPO
from tests.support.cli import nova_ok
from tests.support.deploy import (
    assert_text_shows,
    note_deploy_section,
    ranges_of,
    report_deploy_section,
    status_tail,
)

pytestmark = pytest.mark.recorded


def _studies() -> list[tuple[str, str]]:
    out = []
    for db in sorted((REPO / "benchmarks" / "results").glob("*/study.db")):
        url = f"sqlite:///{db}"
        for name in sorted({n.split(".")[0] for n in optuna.study.get_all_study_names(url)}):
            out.append((url, name))
    return out


@pytest.mark.parametrize(("url", "name"), _studies(), ids=lambda v: Path(v).parent.name if "/" in v else v)
def test_every_place_gives_the_same_answer(url, name):
    results = load_results(name, url)
    answer = deploy_answer(results).as_json()
    assert answer["schema_version"] == DEPLOY_SCHEMA_VERSION and answer["ranges"], answer.get("reason")
    assert answer["ranges"][0]["min_concurrency"] == 1 and answer["ranges"][-1]["max_concurrency"] is None
    for r in answer["ranges"]:
        assert not {"--host", "--port", "--config"} & set(r["argv"]) and r["argv"][:2] == ["vllm", "serve"]
        assert r["evidence"]["status"] in ("verified", "not_enough_evidence", "rejected", "no_candidate")

    policy = json.loads(nova_ok("policy", name, "--storage", url, "--format", "json"))
    assert {k: policy[k] for k in answer} == answer  # the answer's dump, then the verdict's details
    assert [r["trial"] for r in policy["policy"]] == [t for _, t, _ in ranges_of(answer)]

    assert_text_shows(report_deploy_section(render_html(build_report_data(results))), answer, "report")
    assert_text_shows(note_deploy_section(study_note_markdown(results)), answer, "study note")
    assert_text_shows(status_tail(nova_ok("status", name, "--storage", url)), answer, "status")
    assert nova_ok("policy", name, "--storage", url).startswith("What to deploy:")
    for r in answer["ranges"]:
        c = str(r["min_concurrency"])
        text = nova_ok("export", name, "--storage", url, "--as-measured", "--concurrency", c)
        assert shlex.split(text.splitlines()[-1]) == r["argv"], (c, text)
