"""The trained pair's corpus and build plan (``models.trained``): pure functions, on this machine's
real standard library and licence texts. Training itself runs in tests/integration/test_trained_engine.py;
the GPU pair's report from the H200 (benchmarks/results/trained-h200) is checked against the plan here."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from nova_search.models.trained import corpus
from nova_search.models.trained.build import TrainPlan, cpu_facts, default_dir, gpu_plan, plan_key
from tests.support import REPO


def test_the_corpus_holds_out_one_file_in_ten_by_name_on_every_machine() -> None:
    files = corpus.corpus_files()
    assert any(f.suffix == ".py" for f in files)
    assert not any({"test", "site-packages"} & set(f.parts) for f in files if f.suffix == ".py")
    split = corpus.split(files)
    assert set(split.train).isdisjoint(split.held_out)
    assert len(split.train) + len(split.held_out) == len(files)
    assert 0.05 < len(split.held_out) / len(files) < 0.15
    # by name within the library, not by where it is installed
    assert corpus._name(Path("/opt/py/lib/python3.12/json/decoder.py")) == "json/decoder.py"
    assert corpus.split(list(reversed(files))).held_out == tuple(reversed(split.held_out))
    manifest = split.manifest()
    assert manifest["train"]["files"] == len(split.train) and manifest["held_out"]["bytes"] > 0


def test_encode_puts_the_end_of_text_token_after_every_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("ab")
    b.write_text("xyz")
    ids = corpus.encode(lambda texts: [[ord(c) for c in t] for t in texts], [a, b])
    assert ids.dtype.name == "uint16"
    assert ids.tolist() == [97, 98, corpus.EOS, 120, 121, 122, corpus.EOS]


def test_workload_records_are_real_continuations_cut_at_line_ends() -> None:
    texts = ["".join(f"line {i} of a\n" for i in range(200)), "".join(f"row {i} of b\n" for i in range(50))]
    records = corpus.workload_records(texts, prompt_chars=100, answer_chars=40, limit=12)
    assert len(records) == 12
    firsts = [r["messages"][0]["content"] for r in records[:2]]
    assert firsts[0].startswith("line 0") and firsts[1].startswith("row 0")  # round-robin over the texts
    for r in records:
        (user, assistant) = r["messages"]
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert user["content"].endswith("\n") and assistant["content"].endswith("\n")
        assert len(user["content"]) >= 100 and len(assistant["content"]) >= 40
        assert any(user["content"] + assistant["content"] in t for t in texts)  # the text's own continuation
    assert len(corpus.workload_records(texts, 100, 40, limit=10_000)) < 10_000  # the texts run out


def test_the_plan_key_follows_the_plan_and_the_corpus(tmp_path: Path) -> None:
    files = corpus.corpus_files()[:20]
    key = plan_key(TrainPlan(), files)
    assert key == plan_key(TrainPlan(), files)
    assert key != plan_key(replace(TrainPlan(), seed=1), files)
    assert key != plan_key(TrainPlan(), files[:-1])


def test_the_default_folder_is_the_cache_unless_named(monkeypatch) -> None:
    monkeypatch.setenv("NOVA_TRAINED_DIR", "/somewhere/pair")
    assert default_dir() == Path("/somewhere/pair")
    monkeypatch.delenv("NOVA_TRAINED_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/c")
    assert default_dir() == Path("/c/nova-search/trained-cpu")


def test_a_site_folders_sources_are_named_from_the_site_on_every_machine(tmp_path: Path) -> None:
    """The GPU pair's corpus: the bundle's site folder is /tmp/site on the H200 and .gpu/site where it
    was made; a file's name (and so its side of the split) must not depend on which."""
    for root in (tmp_path / "a" / "site", tmp_path / "b" / "deeper" / "site"):
        for rel in ("pkg/__init__.py", "pkg/mod.py", "pkg/tests/test_mod.py", "pkg/__pycache__/x.py"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(f"# {rel}\n")
    a = corpus.package_files(tmp_path / "a" / "site")
    b = corpus.package_files(tmp_path / "b" / "deeper" / "site")
    assert [corpus._name(f) for f in a] == [corpus._name(f) for f in b] == ["pkg/__init__.py", "pkg/mod.py"]
    assert plan_key(TrainPlan(), a) == plan_key(TrainPlan(), b)
    with pytest.raises(RuntimeError, match="no .py files under"):
        corpus.package_files(tmp_path / "a" / "site" / "pkg" / "tests" / "none")


def test_the_gpu_plan_trains_on_cuda_within_five_minutes_of_budgets() -> None:
    plan = gpu_plan()
    assert plan.device == "cuda" and plan.budgets_s is not None and sum(plan.budgets_s) <= 300
    assert plan_key(plan, corpus.corpus_files()[:5]) != plan_key(TrainPlan(), corpus.corpus_files()[:5])
    aux = plan.eagle3["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert (
        max(aux) < plan.target["num_hidden_layers"]
        and plan.eagle3["hidden_size"] == plan.target["hidden_size"]
    )


def test_the_build_records_the_hosts_cpu_and_instruction_sets(tmp_path: Path) -> None:
    """A seeded CPU build repeats byte for byte on one host, not across hosts whose kernels round
    differently (AVX-512 or not): the report says which host made it."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\n")
    assert cpu_facts(info) == {"cpu": "AMD EPYC", "isa": ["avx2", "avx512f", "avx512_bf16"]}
    assert cpu_facts(tmp_path / "absent") == {}


@pytest.mark.recorded
def test_the_committed_gpu_pair_was_trained_on_the_plan_the_code_has() -> None:
    report = json.loads((REPO / "benchmarks" / "results" / "trained-h200" / "pair-report.json").read_text())
    assert report["plan"] == json.loads(json.dumps(asdict(gpu_plan())))
    assert report["target"]["device"] == "NVIDIA H200" and report["target"]["held_out_loss"] < 1.5
    assert 50e6 <= report["target"]["parameters"] <= 150e6  # the 50-150M
    assert report["draft"]["held_out_top1_agreement"] > 0.6
    assert report["eagle3"]["held_out_top1_agreement_step1"] > 0.7
