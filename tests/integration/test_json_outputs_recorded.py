"""The JSON contract on every study recorded on real hardware (benchmarks/results/*/study.db): each
JSON output of each study (``dump``, ``best``, ``status``, ``policy``, and the stored deploy answer
``nova:deploy`` where the study holds one) validates against its shipped schema through
``check-jsonschema``, format checks on, as an automation user would check it (issue 53)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest

from nova_search import schema
from tests.support import REPO
from tests.support.cli import nova
from tests.support.contract import check_files

pytestmark = pytest.mark.recorded

RECORDED = sorted((REPO / "benchmarks" / "results").glob("*/study.db"))
#: the commands whose JSON has a schema, by schema name
COMMANDS = {
    "dump": ("dump",),
    "best": ("best", "--format", "json"),
    "status": ("status", "--format", "json"),
    "policy": ("policy", "--format", "json"),
}


def _studies(url: str) -> list[str]:
    """The studies a file holds, as the command line names them (a staged study's stages, ``X.tune``
    and ``X.speculative``, are one study ``X``)."""
    return sorted({n.split(".")[0] for n in optuna.get_all_study_names(url)})


def test_there_are_recorded_studies() -> None:
    assert len(RECORDED) >= 8, RECORDED


@pytest.mark.parametrize("db", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_every_json_output_of_a_recorded_study_validates(db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "study.db"
    shutil.copy(db, copy)  # never touch the recorded file
    url = f"sqlite:///{copy}"
    files: dict[str, list[Path]] = {name: [] for name in (*COMMANDS, "deploy")}
    for study in _studies(url):
        for name, argv in COMMANDS.items():
            r = nova(argv[0], study, "--storage", url, *argv[1:])
            assert r.returncode == 0, (study, argv, r.stderr[-2000:])
            out = tmp_path / f"{study}.{name}.json"
            out.write_text(r.stdout)
            files[name].append(out)
        for stage in optuna.get_all_study_names(url):
            if not stage.startswith(study):
                continue
            answer = optuna.load_study(study_name=stage, storage=url).user_attrs.get(schema.DEPLOY.key)
            if answer:
                out = tmp_path / f"{stage}.deploy.json"
                out.write_text(json.dumps(answer))
                files["deploy"].append(out)
    for name, paths in files.items():
        if paths:
            check_files(name, *paths)
    assert files["dump"] and files["policy"]
