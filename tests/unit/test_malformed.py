"""A corpus of malformed input, tried as a hostile or careless user would: wrong types, values out of
bounds, NaN and infinities, bad encodings, YAML tricks, unsafe names and paths, broken ``--set``.
Every case goes through the real CLI (``nova-search create``) and must exit 2, with a message that
names the field (or flag, or file) at fault, write nothing (no storage file, no other file), and take
under 2 seconds."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from nova_search.cli import app
from tests.support import REPO

TINY = yaml.safe_load((REPO / "studies" / "tiny-cpu.yaml").read_text())


def at(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation: set the dotted ``path`` of the spec to ``value``."""

    def apply(raw: dict) -> None:
        node = raw
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return apply


def drop(path: str) -> Callable[[dict], None]:
    def apply(raw: dict) -> None:
        node = raw
        *parents, last = path.split(".")
        for p in parents:
            node = node[p]
        node.pop(last)

    return apply


#: (case id, what is done, the words the message must contain). What is done: a mutation of the tiny
#: spec; ``("text", bytes)`` the whole file; ``("set", [...])`` overrides; ``("flags", [...])`` CLI flags.
CASES: list[tuple[str, Any, str]] = [
    # ---- types
    ("name-int", at("name", 5), "name"),
    ("model-str", at("model", "m"), "model"),
    ("concurrency-str", at("sweep.concurrency", "many"), "sweep.concurrency"),
    ("requests-str", at("sweep.requests", "ten"), "sweep.requests"),
    ("objectives-map", at("objectives", {}), "objectives"),
    ("knob-str", at("space.max_num_seqs", "big"), "space.max_num_seqs"),
    ("env-list", at("engine.env", [1]), "engine.env"),
    ("n-trials-float", at("budget.n_trials", 1.5), "budget.n_trials"),
    ("seed-bool", at("workload.seed", True), "workload.seed"),
    ("extra-args-str", at("engine.extra_args", "--x"), "engine.extra_args"),
    ("choices-mixed", at("space.kv_cache_dtype", {"choices": ["auto", 3]}), "space.kv_cache_dtype"),
    ("range-str", at("space.max_num_seqs", {"low": "a", "high": 8}), "space.max_num_seqs"),
    # ---- bounds, NaN and infinities
    ("range-negative", at("space.max_num_seqs", {"low": -5, "high": 8}), "max_num_seqs.low"),
    ("fraction-5", at("space.gpu_memory_utilization", 5.0), "gpu_memory_utilization"),
    ("fraction-nan", at("space.gpu_memory_utilization", {"low": float("nan"), "high": 0.5}), "finite"),
    ("duration-inf", lambda r: (r["sweep"].pop("requests"), r["sweep"].update(duration_s=float("inf"))),
     "sweep.duration_s"),
    ("concurrency-1e8", at("sweep.concurrency", [1, 100_000_000]), "sweep.concurrency.1"),
    ("concurrency-0", at("sweep.concurrency", [0]), "sweep.concurrency.0"),
    ("requests-0", at("sweep.requests", 0), "sweep.requests"),
    ("n-trials-0", at("budget.n_trials", 0), "budget.n_trials"),
    ("n-trials-huge", at("budget.n_trials", 10**9), "budget.n_trials"),
    ("repeats-51", at("sweep.repeats", 51), "sweep.repeats"),
    ("error-rate-2", at("sweep.max_error_rate", 2.0), "sweep.max_error_rate"),
    ("metrics-interval-tiny", at("sweep.metrics_interval_s", 0.001), "sweep.metrics_interval_s"),
    ("boot-timeout-neg", at("engine.boot_timeout_s", -1.0), "engine.boot_timeout_s"),
    ("vocab-5", at("model.vocab_size", 5), "model.vocab_size"),
    ("tp-1000", at("engine.tensor_parallel_size", 1000), "engine.tensor_parallel_size"),
    ("k-0", at("space.speculative.num_speculative_tokens", 0), "num_speculative_tokens"),
    ("lookup-100", at("space.speculative.prompt_lookup_max", 100), "prompt_lookup_max"),
    ("slo-0", at("slo", {"ttft_ms": 0}), "slo.ttft_ms"),
    ("sampler-seed-neg", at("sampler.seed", -1), "sampler.seed"),
    ("input-len-0", at("workload.input_len", 0), "workload.input_len"),
    ("output-len-huge", at("workload.output_len", 10**12), "workload.output_len"),
    ("poisson-rate-0", at("workload.arrival", {"kind": "poisson", "rate": 0}), "workload.arrival"),
    ("choices-empty", at("space.kv_cache_dtype", {"choices": []}), "space.kv_cache_dtype"),
    ("cpus-negative", at("engine.cpus", [-1]), "engine.cpus"),
    ("client-cpus-bad", at("sweep.client_cpus", "8-x"), "sweep.client_cpus"),
    ("defaults-fraction", at("engine.defaults.gpu_memory_utilization", 0.0),
     "engine.defaults.gpu_memory_utilization"),
    ("constraint-inf", at("constraints", ["ttft_p99_ms <= 1e999"]), "constraints.0"),
    # ---- encodings
    ("not-utf8", ("text", b"name: tiny\xff\n"), "not UTF-8 text (byte 0xff at offset 10)"),
    ("utf16", ("text", "name: tiny\n".encode("utf-16")), "not UTF-8"),
    ("nul", ("text", b"name: ti\x00ny\n"), "not valid YAML"),
    ("too-large", ("text", b"# " + b"x" * (1 << 20) + b"\n"), "a spec is at most 1024 KiB"),
    # ---- YAML tricks
    ("alias-bomb", ("text", b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                            b"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                            b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"),
     "YAML anchors are not accepted"),
    ("alias", ("text", b"name: &n tiny\nother: *n\n"), "YAML anchors are not accepted"),
    ("top-list", ("text", b"- name: tiny\n"), "the top level must be a mapping"),
    ("top-scalar", ("text", b"tiny\n"), "the top level must be a mapping"),
    ("empty", ("text", b""), "the top level must be a mapping"),
    ("tab-indent", ("text", b"name: tiny\nmodel:\n\tpath: x\n"), "not valid YAML"),
    ("unclosed", ("text", b"name: [tiny\n"), "not valid YAML"),
    ("python-tag", ("text", b"name: !!python/object/apply:os.system ['true']\n"), "not valid YAML"),
    # ---- names and paths
    ("name-escape", at("name", "../../escape"), "not a safe study name"),
    ("name-dots", at("name", ".."), "not a safe study name"),
    ("name-slash", at("name", "a/b"), "not a safe study name"),
    ("name-space", at("name", "a b"), "not a safe study name"),
    ("name-long", at("name", "x" * 200), "not a safe study name"),
    ("flag-study-name", ("flags", ["--study-name", "../x"]), "--study-name"),
    # ---- --set
    ("set-no-equals", ("set", ["novalue"]), "--set 'novalue': write it as dotted.key=value"),
    ("set-no-key", ("set", ["=3"]), "--set '=3'"),
    ("set-bad-yaml", ("set", ["sweep.concurrency=[1,"]), "--set sweep.concurrency: not valid YAML"),
    ("set-not-mapping", ("set", ["name.x=1"]), "--set name.x: name is not a mapping"),
    ("set-bound", ("set", ["sweep.repeats=0"]), "sweep.repeats"),
    ("set-unknown", ("set", ["sweep.nope=1"]), "sweep.nope: unknown field"),
    ("set-type", ("set", ["sweep.requests=abc"]), "sweep.requests"),
    ("set-secret", ("set", ["engine.env.HF_TOKEN=hf_xyz"]), "env.HF_TOKEN looks like a secret"),
    ("set-alias", ("set", ["sweep.concurrency=&a [1]"]), "YAML anchors are not accepted"),
    # ---- meaning
    ("speculative-alone", at("stages", ["speculative"]), "stages"),
    ("objective-metric", at("objectives", [{"metric": "speed", "direction": "maximize"}]),
     "unknown metric 'speed'"),
    ("objective-level", at("objectives", [{"metric": "output_throughput", "direction": "maximize", "at": 7}]),
     "objectives.0.at"),
    ("constraint-unreadable", at("constraints", ["ttft_p99_ms == 5"]), "constraints.0"),
    ("constraint-metric", at("constraints", ["speed <= 5"]), "unknown metric 'speed'"),
    ("requests-and-duration", at("sweep.duration_s", 5.0), "give exactly one of requests or duration_s"),
    ("neither-window", drop("sweep.requests"), "give exactly one of requests or duration_s"),
    ("python-and-command", lambda r: r["engine"].update(python="/usr/bin/python3", command=["vllm", "serve"]),
     "engine.python"),
    ("extra-args-port", at("engine.extra_args", ["--port", "1"]), "extra_args must not set --port"),
    ("unknown-top", at("nope", 1), "nope: unknown field"),
    ("method-unknown", at("space.speculative.method", "magic"), "method 'magic'"),
    ("drafter-missing", drop("space.speculative.drafters"), "drafters.draft_model is required"),
    ("sampler-name", at("sampler.name", "annealing"), "sampler.name"),
    ("api-key-in-env", at("engine.env", {"VLLM_API_KEY": "k"}), "env.VLLM_API_KEY"),
    ("jsonl-no-path", at("workload", {"kind": "jsonl"}), "path: required for kind jsonl"),
    ("prompt-format-jsonl", at("workload", {"kind": "jsonl", "path": "x.jsonl", "prompt_format": "text"}),
     "prompt_format: only kind synthetic takes it"),
]  # fmt: skip


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 60 and len({c for c, _, _ in CASES}) == len(CASES)


@pytest.mark.serial  # bounds how long bad input takes to fail: scripts/test.sh runs it alone
@pytest.mark.parametrize(("case", "what", "needle"), CASES, ids=[c for c, _, _ in CASES])
def test_malformed_input_exits_2_naming_the_field_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, what: Any, needle: str
):
    monkeypatch.chdir(tmp_path)
    spec_path = tmp_path / "spec.yaml"
    args: list[str] = []
    if isinstance(what, tuple) and what[0] == "text":
        spec_path.write_bytes(what[1])
    else:
        raw = copy.deepcopy(TINY)
        if isinstance(what, tuple) and what[0] == "set":
            args += [a for item in what[1] for a in ("--set", item)]
        elif isinstance(what, tuple) and what[0] == "flags":
            args += what[1]
        else:
            what(raw)
        spec_path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    before = sorted(p.name for p in tmp_path.iterdir())
    t0 = time.perf_counter()
    result = CliRunner().invoke(app, ["create", str(spec_path), "--storage", "sqlite:///study.db", *args])
    took = time.perf_counter() - t0
    assert result.exit_code == 2, (case, result.exit_code, result.output)
    assert needle in " ".join(result.output.split()), (case, result.output)
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written: no storage, no file
    assert took < 2.0, (case, took)
