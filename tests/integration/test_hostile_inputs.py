# ruff: noqa: E501 - the table below is one row a line, to be read (and appended to) as a table
"""Hostile input through the real command line (issue 40): each row is a spec file, a ``--set``, a flag
or an environment that a hostile or careless user could give, run as users run it (a subprocess of
``python -m nova_search``, under a 4 GiB address-space cap). Every row must:

- exit 2 (bad input), within 5 seconds, without a traceback;
- say what is wrong, naming the field, flag, variable or file (the row's ``needle``);
- write nothing: its folder is as it was (no SQLite file, no lock file, nothing else), and the rows run
  against PostgreSQL (``pg=True``) leave their fresh database without a table.

The rows run in parallel threads, all at once, in a module fixture (one pass of ``python -m`` each:
about half a second of CPU); the tests only read the results. Other families append their rows at the
end of ``ROWS``.
"""

from __future__ import annotations

import copy
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from tests.support import REPO

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.serial,
    pytest.mark.faults,
]  # serial: it bounds how long a refusal takes

TINY: dict[str, Any] = yaml.safe_load((REPO / "studies" / "tiny-cpu.yaml").read_text())
TINY_TEXT = (REPO / "studies" / "tiny-cpu.yaml").read_text()
#: the longest a refusal may take
BOUND_S = 5.0
#: a row still running after this is killed (it hung: the bound above fails it)
KILL_S = 30.0
DIGITS = "9" * 5000


def at(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation of the tiny spec: set the dotted ``path`` to ``value``."""

    def apply(raw: dict) -> None:
        node = raw
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return apply


def text(s: str) -> bytes:
    return s.encode()


def tiny_plus(extra: str) -> bytes:
    """The tiny spec's text with ``extra`` lines appended (a second key, say)."""
    return (TINY_TEXT + extra).encode()


def tiny_replace(old: str, new: str) -> bytes:
    assert old in TINY_TEXT, old
    return TINY_TEXT.replace(old, new).encode()


@dataclass(frozen=True)
class Row:
    """One hostile input. ``spec``: a mutation of the tiny spec, or the spec file's bytes. ``argv``: the
    command, with {spec}, {storage} and {dir} filled in (default: create the spec in the row's storage).
    ``env``: set for the command (a value of None removes the variable). ``prepare``: run in the row's
    folder first (a FIFO, a study that exists); what it leaves there is the "before" of "nothing
    written". ``pg``: run a second time against PostgreSQL."""

    id: str
    needle: str
    spec: Callable[[dict], None] | bytes | None = None
    argv: tuple[str, ...] = ("create", "{spec}", "--storage", "{storage}")
    env: dict[str, str | None] = field(default_factory=dict)
    prepare: Callable[[Path, str], None] | None = None
    pg: bool = False


def create_args(*extra: str) -> tuple[str, ...]:
    return ("create", "{spec}", "--storage", "{storage}", *extra)


def sets(*items: str) -> tuple[str, ...]:
    return create_args(*(a for item in items for a in ("--set", item)))


def bench(*extra: str) -> tuple[str, ...]:
    return ("bench", "--url", "http://127.0.0.1:9", *extra)


# ---------------------------------------------------------------- what a row prepares in its folder


def _replace_spec(make: Callable[[Path], None]) -> Callable[[Path, str], None]:
    def prepare(folder: Path, storage: str) -> None:
        spec = folder / "spec.yaml"
        spec.unlink()
        make(spec)

    return prepare


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


def _study(budget: int, **changes: str) -> Callable[[Path, str], None]:
    """A study made by ``create`` (budget ``budget``, --set ``changes``) in the row's storage."""

    def prepare(folder: Path, storage: str) -> None:
        overrides = [f"budget.n_trials={budget}", *(f"{k}={v}" for k, v in changes.items())]
        r = _nova(["create", str(folder / "spec.yaml"), "--storage", storage,
                   *(a for o in overrides for a in ("--set", o))], folder, {})  # fmt: skip
        assert r.returncode == 0, r.stderr

    return prepare


def _fifo_at(name: str) -> Callable[[Path, str], None]:
    """A FIFO at ``name`` in the row's folder (a spec field or the storage points at it)."""

    def prepare(folder: Path, storage: str) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)

    return prepare


# ---------------------------------------------------------------- the rows

NUL = "a\x00b"

ROWS: list[Row] = [
    # ---- the YAML reader (finding 6): duplicate keys, merge keys, huge integers, deep nesting
    Row("dup-budget", "budget: given twice (line", tiny_plus("budget:\n  n_trials: 2\n"), pg=True),
    Row("dup-requests", "sweep.requests: given twice", tiny_replace("  requests: 16\n", "  requests: 16\n  requests: 2\n")),
    Row("dup-name", "name: given twice", tiny_plus("name: other\n")),
    Row("dup-env", "engine.env.A: given twice", tiny_replace("env: {VLLM_CPU_OMP_THREADS_BIND: \"0\"}", "env: {A: x, A: y}")),
    Row("dup-flow-choices", "space.kv_cache_dtype.choices: given twice", tiny_replace("kv_cache_dtype: {choices: [auto, fp8]}", "kv_cache_dtype: {choices: [auto], choices: [fp8]}")),
    Row("dup-objective-key", "objectives.0.metric: given twice", tiny_replace("- {metric: output_throughput,", "- {metric: ttft_p99_ms, metric: output_throughput,")),
    Row("dup-quoted", "budget.n_trials: given twice", tiny_replace("  n_trials: 6", "  n_trials: 6\n  \"n_trials\": 2")),
    Row("merge-budget", "budget: YAML merge keys", tiny_replace("  n_trials: 6", "  n_trials: 6\n  <<: {n_trials: 3}")),
    Row("merge-top", "the top level: YAML merge keys", tiny_plus("<<: {name: other}\n")),
    Row("merge-list", "YAML merge keys", tiny_replace("  n_trials: 6", "  <<: [{n_trials: 3}, {n_trials: 4}]")),
    Row("bigint-budget", "budget.n_trials: an integer of 5000 characters", tiny_replace("n_trials: 6", f"n_trials: {DIGITS}"), pg=True),
    Row("bigint-negative", "workload.seed: an integer of 5001", tiny_replace("  seed: 0\n", f"  seed: -{DIGITS}\n")),
    Row("bigint-hex", "sweep.requests: an integer", tiny_replace("requests: 16", "requests: 0x" + "f" * 5000)),
    Row("bigint-underscores", "sweep.requests: an integer", tiny_replace("requests: 16", "requests: " + "9_" * 2500 + "9")),
    Row("bigint-in-list", "sweep.concurrency.1: an integer", tiny_replace("concurrency: [1, 4]", f"concurrency: [1, {DIGITS}]")),
    Row("bigint-key", "not valid YAML", tiny_replace("env: {VLLM_CPU_OMP_THREADS_BIND: \"0\"}", f"env: {{{DIGITS}: x}}")),
    Row("bigint-tagged", "sweep.requests: an integer", tiny_replace("requests: 16", f"requests: !!int \"{DIGITS}\"")),
    Row("bigint-set", "--set budget.n_trials: an integer of 5000 characters", None, sets(f"budget.n_trials={DIGITS}"), pg=True),
    Row("bigint-set-list", "--set sweep.concurrency", None, sets(f"sweep.concurrency=[1, {DIGITS}]")),
    Row("bigint-set-seed", "--set sampler.seed", None, sets(f"sampler.seed={DIGITS}")),
    Row("deep-flow-lists", "nested deeper than 64 levels", tiny_plus("x: " + "[" * 20000 + "]" * 20000 + "\n"), pg=True),
    Row("deep-flow-maps", "nested deeper than 64 levels", tiny_plus("x: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n")),
    Row("deep-block-lists", "nested deeper than 64 levels", tiny_plus("x:\n" + "- " * 20000 + "1\n")),
    Row("deep-unclosed", "x.0.0...: nested deeper", tiny_plus("x: " + "[" * 20000 + "\n")),
    Row("deep-set", "--set budget.n_trials", None, sets("budget.n_trials=" + "[" * 20000 + "]" * 20000)),
    Row("deep-set-map", "--set engine.env", None, sets("engine.env=" + "{a: " * 20000 + "1" + "}" * 20000)),
    Row("bad-date", "'2024-13-45' is not a date", tiny_plus("x: 2024-13-45\n")),
    Row("bad-date-set", "--set name", None, sets("name=2024-02-31")),
    Row("float-5000-digits", "budget.n_trials", tiny_replace("n_trials: 6", f"n_trials: 1.{DIGITS}")),
    Row("float-overflow", "budget.n_trials", tiny_replace("n_trials: 6", "n_trials: 1e999")),
    Row("binary-tag", "name", tiny_replace("name: tiny-cpu", "name: !!binary aGVsbG8=")),
    Row("set-tag", "name", tiny_replace("name: tiny-cpu", "name: !!set {a, b}")),
    Row("complex-key", "not valid YAML", tiny_plus("? [a, b]\n: c\n")),
    Row("python-object", "not valid YAML", tiny_replace("name: tiny-cpu", "name: !!python/object/apply:os.system [true]")),
    Row("alias-bomb", "YAML anchors are not accepted", tiny_plus("a: &a [1, 1, 1]\nb: [*a, *a]\n")),
    # ---- the spec file itself (finding 5: a FIFO blocked `create`; finding 6)
    Row("spec-fifo", "a FIFO (named pipe), not a regular file", None, prepare=_replace_spec(_fifo), pg=True),
    Row("spec-dev-zero", "a character device, not a regular file", None, prepare=_replace_spec(lambda p: p.symlink_to("/dev/zero"))),
    Row("spec-dev-null", "a character device", None, prepare=_replace_spec(lambda p: p.symlink_to("/dev/null"))),
    Row("spec-directory", "a directory, not a regular file", None, prepare=_replace_spec(lambda p: p.mkdir())),
    Row("spec-socket", "a socket, not a regular file", None, prepare=_replace_spec(_socket)),
    Row("spec-link-loop", "cannot read spec", None, prepare=_replace_spec(lambda p: p.symlink_to(p))),
    Row("spec-missing", "cannot read spec", None, prepare=_replace_spec(lambda p: None)),
    Row("spec-too-large", "a spec is at most 1024 KiB", tiny_plus("# " + "x" * (1 << 20) + "\n")),
    Row("spec-not-utf8", "not UTF-8 text", tiny_plus("name2: \xff\n").replace(b"\xc3\xbf", b"\xff")),
    Row("spec-nul-byte", "not valid YAML", tiny_plus("x: a\x00b\n")),
    # ---- accepted at create, then failing every trial (finding 7): NUL bytes
    Row("nul-model-path", "model.path: the value holds a NUL byte", at("model.path", NUL), pg=True),
    Row("nul-served-name", "model.served_name: the value holds a NUL byte", at("model.served_name", NUL)),
    Row("nul-env-value", "engine.env: the value of A holds a NUL byte", at("engine.env", {"A": NUL}), pg=True),
    Row("nul-env-name", "engine.env: a key", at("engine.env", {NUL: "x"})),
    Row("nul-extra-arg", "engine.extra_args: item 1 holds a NUL byte", at("engine.extra_args", ["--enforce-eager", NUL])),
    Row("nul-python", "engine.python: the value holds a NUL byte", at("engine.python", NUL)),
    Row("nul-command", "engine.command: item 1 holds a NUL byte", at("engine.command", ["vllm", NUL])),
    Row("nul-drafter", "drafters: the value of draft_model holds a NUL byte", at("space.speculative.drafters", {"draft_model": NUL})),
    Row("nul-tokenizer", "workload.tokenizer: the value holds a NUL byte", at("workload.tokenizer", NUL)),
    Row("nul-artifacts", "artifacts_dir: the value holds a NUL byte", at("artifacts_dir", NUL)),
    Row("nul-storage", "storage: the value holds a NUL byte", at("storage", "sqlite:///a\x00b.db")),
    Row("nul-knob-choice", "space.kv_cache_dtype", at("space.kv_cache_dtype", {"choices": ["auto", NUL]})),
    Row("nul-jsonl-path", "workload.path: the value holds a NUL byte", at("workload", {"kind": "jsonl", "path": NUL})),
    Row("nul-set-served-name", "model.served_name: the value holds a NUL byte", None, sets('model.served_name="a\\0b"')),
    # ---- env names
    Row("env-name-equals", "engine.env: 'A=B' is not an environment variable name", at("engine.env", {"A=B": "x"}), pg=True),
    Row("env-name-digit", "engine.env: '1A' is not an environment variable name", at("engine.env", {"1A": "x"})),
    Row("env-name-space", "engine.env: 'A B' is not an environment variable name", at("engine.env", {"A B": "x"})),
    Row("env-name-dash", "engine.env: 'A-B' is not an environment variable name", at("engine.env", {"A-B": "x"})),
    Row("env-name-empty", "engine.env: '' is not an environment variable name", at("engine.env", {"": "x"})),
    Row("env-name-dollar", "is not an environment variable name", at("engine.env", {"$A": "x"})),
    Row("env-name-set", "engine.env: 'A=B' is not an environment variable name", None, sets('engine.env={"A=B": x}')),
    Row("env-value-40k", "engine.env: the value of A is 40000 characters long; at most 32768", at("engine.env", {"A": "x" * 40000})),
    # ---- names, paths and arguments that could never launch, or would read as a flag
    Row("served-name-200k", "model.served_name: the value is 204800 characters long; at most 32768", at("model.served_name", "x" * 204800), pg=True),
    Row("served-name-257", "model.served_name: is 257 characters long; at most 256", at("model.served_name", "x" * 257)),
    Row("served-name-100k-set", "model.served_name: the value is 100000 characters long", None, sets("model.served_name=" + "x" * 100000)),
    Row("served-name-flag", "model.served_name: '--trust-remote-code' starts with '-'", at("model.served_name", "--trust-remote-code"), pg=True),
    Row("served-name-dash", "model.served_name: '-x' starts with '-'", at("model.served_name", "-x")),
    Row("served-name-empty", "model.served_name: is empty", at("model.served_name", "")),
    Row("served-name-newline", "served_name holds a control character", at("model.served_name", "a\nb")),
    Row("model-path-flag", "model.path: '--trust-remote-code' starts with '-'", at("model.path", "--trust-remote-code"), pg=True),
    Row("model-path-dash-set", "model.path: '-m' starts with '-'", None, sets("model.path=-m")),
    Row("model-path-empty", "model.path: is empty", at("model.path", "")),
    Row("model-path-blank", "model.path: is empty", at("model.path", "   ")),
    Row("model-path-newline", "path holds a control character", at("model.path", "./m\ntouch /tmp/x")),
    Row("model-path-5000", "model.path: is 5000 characters long; at most 4096", at("model.path", "m" * 5000)),
    Row("drafter-flag", "space.speculative.drafters.draft_model: '--x' starts with '-'", at("space.speculative.drafters", {"draft_model": "--x"})),
    Row("tokenizer-flag", "workload.tokenizer: '-t' starts with '-'", at("workload.tokenizer", "-t")),
    Row("jsonl-path-flag", "workload.path: '--data' starts with '-'", at("workload", {"kind": "jsonl", "path": "--data"})),
    Row("python-flag", "engine.python: '-c' starts with '-'", at("engine.python", "-c")),
    Row("python-empty", "engine.python: is empty", at("engine.python", "")),
    Row("artifacts-empty", "artifacts_dir: is empty", at("artifacts_dir", "")),
    Row("host-empty", "engine.host: '' is not an address to bind to", at("engine.host", ""), pg=True),
    Row("host-blank", "engine.host: ' ' is not an address", at("engine.host", " ")),
    Row("host-flag", "engine.host: '--x' is not an address", at("engine.host", "--x")),
    Row("host-space", "engine.host: 'a b' is not an address", at("engine.host", "a b")),
    Row("host-newline", "host holds a control character", at("engine.host", "a\nb")),
    Row("host-long", "engine.host: 300 characters long", at("engine.host", "h" * 300)),
    Row("host-set-empty", "engine.host: '' is not an address", None, sets('engine.host=""')),
    Row("command-empty-first", "engine.command.0: an empty element", at("engine.command", ["", "serve"]), pg=True),
    Row("command-empty-last", "engine.command.1: an empty element", at("engine.command", ["vllm", ""])),
    Row("command-blank", "engine.command.1: an empty element", at("engine.command", ["vllm", "  "])),
    Row("command-flag-first", "engine.command.0: '--x' is a flag", at("engine.command", ["--x", "serve"])),
    Row("command-empty", "engine.command must not be empty", at("engine.command", [])),
    Row("extra-arg-empty", "engine.extra_args.1: an empty argument", at("engine.extra_args", ["--enforce-eager", ""])),
    Row("env-value-100k-set", "engine.env: the value of A is 100000 characters long", None, sets("engine.env.A=" + "x" * 100000)),
    Row("command-100k", "engine.command: item 1 is 100000 characters long", at("engine.command", ["vllm", "x" * 100000])),
    Row("extra-arg-40k", "engine.extra_args: item 0 is 40000 characters long; at most 32768", at("engine.extra_args", ["x" * 40000])),
    Row("many-long-args-bad-host", "engine.host: '' is not an address", at("engine", {**TINY["engine"], "extra_args": ["x" * 32000] * 25, "host": ""})),
    Row("many-long-env-bad-name", "engine.env: 'A=B' is not an environment variable name", at("engine.env", {**{f"V{i}": "x://" + "y" * 32000 for i in range(25)}, "A=B": "x"})),
    # ---- cores
    Row("cpus-65535", "engine.cpus: core 65535 is above 4095", at("engine.cpus", [65535]), pg=True),
    Row("cpus-4096", "engine.cpus: core 4096 is above 4095", at("engine.cpus", [0, 4096])),
    Row("cpus-set", "engine.cpus: core 65535 is above 4095", None, sets("engine.cpus=[65535]")),
    Row("client-cpus-65535", "sweep.client_cpus: core 65535 is above 4095", at("sweep.client_cpus", [65535])),
    Row("client-cpus-range-bomb", "sweep.client_cpus: '0-100000000': core 100000000 is above 4095", at("sweep.client_cpus", "0-100000000"), pg=True),
    Row("client-cpus-range-set", "sweep.client_cpus", None, sets('sweep.client_cpus="0-99999999999"')),
    Row("client-cpus-list-bomb", "sweep.client_cpus", at("sweep.client_cpus", ["0-70000000", 1])),
    Row("worker-cpus-not-here", "engine.cpus: core 4000 is not one this process may run on", None,
        ("worker", "tiny-cpu", "--storage", "{storage}"), prepare=_study(2, **{"engine.cpus": "[4000]"})),
    Row("run-cpus-not-here", "engine.cpus: core 4001 is not one this process may run on", None,
        ("run", "{spec}", "--storage", "{storage}", "--set", "engine.cpus=[4001]")),
    # ---- storage (finding 8)
    Row("storage-flag-empty", "--storage is empty", None, ("create", "{spec}", "--storage", "")),
    Row("storage-flag-blank", "--storage is empty", None, ("create", "{spec}", "--storage", "  ")),
    Row("storage-env-empty", "NOVA_STORAGE is set but empty", None, ("create", "{spec}"), env={"NOVA_STORAGE": ""}),
    Row("storage-env-blank", "NOVA_STORAGE is set but empty", None, ("create", "{spec}"), env={"NOVA_STORAGE": " "}),
    Row("storage-env-empty-run", "NOVA_STORAGE is set but empty", None, ("run", "{spec}"), env={"NOVA_STORAGE": ""}),
    Row("storage-env-empty-worker", "NOVA_STORAGE is set but empty", None, ("worker", "tiny-cpu"), env={"NOVA_STORAGE": ""}),
    Row("storage-env-empty-db", "NOVA_STORAGE is set but empty", None, ("db", "upgrade"), env={"NOVA_STORAGE": ""}),
    Row("storage-memory", "an in-memory SQLite database is lost", None, ("create", "{spec}", "--storage", "sqlite:///:memory:")),
    Row("storage-memory-bare", "--storage sqlite://: an in-memory SQLite database", None, ("create", "{spec}", "--storage", "sqlite://")),
    Row("storage-memory-env", "NOVA_STORAGE sqlite:///:memory:", None, ("run", "{spec}"), env={"NOVA_STORAGE": "sqlite:///:memory:"}),
    Row("storage-memory-spec", "storage sqlite:///:memory:: an in-memory", at("storage", "sqlite:///:memory:"), ("create", "{spec}")),
    Row("storage-memory-uri", "an in-memory SQLite database", None, ("create", "{spec}", "--storage", "sqlite:///file:x?mode=memory&uri=true")),
    # ---- budget (finding 8): an explicit --n-trials that the stored budget would not keep
    Row("run-n-trials-vs-stored", "--n-trials 5: study 'tiny-cpu' exists with a budget of 2 trials", None,
        ("run", "{spec}", "--storage", "{storage}", "--n-trials", "5"), prepare=_study(2)),
    Row("run-n-trials-0", "--n-trials", None, ("run", "{spec}", "--storage", "{storage}", "--n-trials", "0")),
    Row("run-n-trials-huge", "budget.n_trials", None, ("run", "{spec}", "--storage", "{storage}", "--n-trials", "1000000000")),
    Row("run-n-trials-digits", "--n-trials", None, ("run", "{spec}", "--storage", "{storage}", "--n-trials", DIGITS)),
    # ---- bench (finding 8)
    Row("bench-concurrency-1e8", "--concurrency 100000000: at most 100000", None, bench("--concurrency", "100000000", "--num-requests", "5")),
    Row("bench-concurrency-digits", "--concurrency", None, bench("--concurrency", DIGITS, "--num-requests", "5")),
    Row("bench-concurrency-levels", "--concurrency: 101 levels; at most 100", None, bench("--concurrency", ",".join(str(i) for i in range(1, 102)), "--num-requests", "5")),
    Row("bench-num-requests-huge", "--num-requests 1000000000000: at most 10000000", None, bench("--concurrency", "1", "--num-requests", "1000000000000")),
    Row("bench-input-len-huge", "--input-len 1000000000: at most 10000000", None, bench("--concurrency", "1", "--num-requests", "1", "--input-len", "1000000000")),
    Row("bench-output-len-huge", "--output-len 1000000000: at most", None, bench("--concurrency", "1", "--num-requests", "1", "--output-len", "1000000000")),
    Row("bench-warmup-huge", "--warmup 100000000: at most 100000", None, bench("--concurrency", "1", "--num-requests", "1", "--warmup", "100000000")),
    Row("bench-duration-huge", "--duration 1000000000.0: at most 86400", None, bench("--concurrency", "1", "--duration", "1e9")),
    Row("bench-processes-huge", "--processes '100000'", None, bench("--concurrency", "1", "--num-requests", "1", "--processes", "100000")),
    Row("bench-cpus-bomb", "--cpus '0-99999999'", None, bench("--concurrency", "1", "--num-requests", "1", "--cpus", "0-99999999")),
    Row("bench-cpus-not-here", "--cpus: core 4000 is not one this process may run on", None, bench("--concurrency", "1", "--num-requests", "1", "--cpus", "4000")),
    # ---- other flags
    Row("study-name-empty", "--study-name", None, create_args("--study-name", "")),
    Row("study-name-flag", "--study-name", None, create_args("--study-name=--x")),
    Row("gpus-digits", "--gpus", None, ("run", "{spec}", "--storage", "{storage}", "--gpus", DIGITS)),
    Row("set-empty-key-part", "--set 'a..b=1': write it as dotted.key=value", None, sets("a..b=1")),
    # ---- issue 53: extra_args and engine.env may not override nova's own flags and environment
    Row("extra-served-name", "extra_args.0: extra_args must not set --served-model-name", at("engine.extra_args", ["--served-model-name", "x"]), pg=True),
    Row("extra-served-name-eq", "extra_args must not set --served-model-name (as --served_model_name)", at("engine.extra_args", ["--enforce-eager", "--served_model_name=x"])),
    Row("extra-model", "extra_args.0: extra_args must not set --model", at("engine.extra_args", ["--model", "/other"])),
    Row("extra-model-eq", "extra_args must not set --model", at("engine.extra_args", ["--model=/other"])),
    Row("extra-tp", "extra_args must not set --tensor-parallel-size (as -tp)", at("engine.extra_args", ["-tp", "2"]), pg=True),
    Row("extra-tp-eq", "extra_args must not set --tensor-parallel-size (as -tp)", at("engine.extra_args", ["-tp=2"])),
    Row("extra-tp-prefix", "extra_args must not set --tensor-parallel-size (as -t)", at("engine.extra_args", ["-t", "2"])),
    Row("extra-tp-long", "extra_args must not set --tensor-parallel-size", at("engine.extra_args", ["--tensor-parallel-size", "2"])),
    Row("extra-tp-abbrev", "extra_args must not set --tensor-parallel-size (as --tensor-parallel)", at("engine.extra_args", ["--tensor-parallel", "2"])),
    Row("extra-pp", "extra_args must not set --pipeline-parallel-size (as -pp)", at("engine.extra_args", ["-pp", "2"])),
    Row("extra-dp", "extra_args must not set --data-parallel-size", at("engine.extra_args", ["--data_parallel_size=2"])),
    Row("extra-host", "extra_args must not set --host", None, sets('engine.extra_args=["--host", "0.0.0.0"]')),
    Row("extra-port", "extra_args must not set --port", at("engine.extra_args", ["--port=1"])),
    Row("extra-api-key", "extra_args must not set --api-key", at("engine.extra_args", ["--api-key", "k"])),
    Row("extra-uds", "extra_args must not set --uds", at("engine.extra_args", ["--uds", "/tmp/s"])),
    Row("env-cuda-visible", "env.CUDA_VISIBLE_DEVICES: engine.env must not set CUDA_VISIBLE_DEVICES", at("engine.env", {"CUDA_VISIBLE_DEVICES": "0,1"}), pg=True),
    Row("env-nvidia-visible", "engine.env must not set NVIDIA_VISIBLE_DEVICES", at("engine.env", {"NVIDIA_VISIBLE_DEVICES": "all"})),
    Row("env-ld-preload", "env.LD_PRELOAD: engine.env must not set LD_PRELOAD", at("engine.env", {"LD_PRELOAD": "/tmp/x.so"})),
    Row("env-vllm-host-ip", "engine.env must not set VLLM_HOST_IP", at("engine.env", {"VLLM_HOST_IP": "10.0.0.1"})),
    Row("env-vllm-port", "engine.env must not set VLLM_PORT", at("engine.env", {"VLLM_PORT": "1"})),
    Row("env-api-key", "engine.env must not set VLLM_API_KEY", at("engine.env", {"VLLM_API_KEY": "${K}"})),
    Row("env-cuda-set", "engine.env must not set CUDA_VISIBLE_DEVICES", None, sets('engine.env.CUDA_VISIBLE_DEVICES="3"')),
    # ---- issue 53: control characters (terminal escapes, OSC, C1, bidirectional overrides)
    Row("extra-esc", "extra_args.1 holds a control character (\\x1b)", at("engine.extra_args", ["--enforce-eager", "\x1b[2J"]), pg=True),
    Row("extra-osc", "extra_args.0 holds a control character (\\x1b)", at("engine.extra_args", ["\x1b]0;pwned\x07"])),
    Row("extra-bidi", "extra_args.1 holds a control character (\\u202e)", at("engine.extra_args", ["--x", "a\u202eb"])),
    Row("extra-isolate", "extra_args.1 holds a control character (\\u2066)", at("engine.extra_args", ["--x", "a\u2066b"])),
    Row("extra-c1", "extra_args.1 holds a control character (\\x9b)", at("engine.extra_args", ["--x", "a\x9bb"])),
    Row("choice-esc", "kv_cache_dtype.choices.1: kv_cache_dtype holds a control character (\\x1b)", at("space.kv_cache_dtype", {"choices": ["auto", "fp8\x1b[31m"]}), pg=True),
    Row("choice-bidi", "attention_backend.choices.0: attention_backend holds a control character (\\u202e)", at("space.attention_backend", {"choices": ["\u202eNAIVE"]})),
    Row("fixed-knob-esc", "kv_cache_dtype holds a control character", at("space.kv_cache_dtype", "auto\x1b")),
    Row("defaults-knob-esc", "engine.defaults: kv_cache_dtype: kv_cache_dtype holds a control character", at("engine.defaults", {"gpu_memory_utilization": 0.3, "kv_cache_dtype": "a\x1b]8;;x\x07"})),
    Row("served-name-esc", "served_name holds a control character (\\x1b)", at("model.served_name", "tiny\x1b[2J")),
    Row("served-name-osc", "served_name holds a control character (\\x1b)", at("model.served_name", "tiny\x1b]0;x\x07")),
    Row("served-name-bidi", "served_name holds a control character (\\u202e)", at("model.served_name", "tiny\u202e"), pg=True),
    Row("served-name-rlo-set", "served_name holds a control character", None, sets('model.served_name="a\u202eb"')),
    Row("env-value-esc", "engine.env.A: the value holds a control character (\\x1b)", at("engine.env", {"A": "x\x1b[2J"})),
    Row("drafter-bidi", "space.speculative.drafters.draft_model: holds a control character (\\u202e)", at("space.speculative.drafters", {"draft_model": "m\u202e"})),
    Row("tokenizer-bidi", "workload.tokenizer: holds a control character", at("workload.tokenizer", "t\u2067")),
    Row("host-bidi", "host holds a control character (\\u202e)", at("engine.host", "127.0.0.1\u202e")),
    # ---- issue 53: knob choices that read as flags
    Row("choice-flag", "kv_cache_dtype.choices.1: kv_cache_dtype '--trust-remote-code' starts with '-'", at("space.kv_cache_dtype", {"choices": ["auto", "--trust-remote-code"]}), pg=True),
    Row("fixed-knob-flag", "attention_backend '-x' starts with '-'", at("space.attention_backend", "-x")),
    Row("defaults-knob-flag", "engine.defaults: kv_cache_dtype", at("engine.defaults", {"gpu_memory_utilization": 0.3, "kv_cache_dtype": "--x"})),
    Row("choice-flag-set", "kv_cache_dtype", None, sets('space.kv_cache_dtype={choices: [auto, "--enforce-eager"]}')),
    # ---- issue 53: a FIFO or a device where a trial reads a file, refused at create
    Row("tokenizer-fifo", "workload.tokenizer: tok.fifo is a FIFO (named pipe), not a regular file", at("workload.tokenizer", "tok.fifo"), prepare=_fifo_at("tok.fifo"), pg=True),
    Row("tokenizer-dev-zero", "workload.tokenizer: /dev/zero is a character device", at("workload.tokenizer", "/dev/zero")),
    Row("tokenizer-json-fifo", "workload.tokenizer: tok/tokenizer.json is a FIFO", at("workload.tokenizer", "tok"), prepare=_fifo_at("tok/tokenizer.json")),
    Row("jsonl-fifo", "workload.path: p.jsonl is a FIFO (named pipe)", at("workload", {"kind": "jsonl", "path": "p.jsonl"}), prepare=_fifo_at("p.jsonl"), pg=True),
    Row("jsonl-dev-zero", "workload.path: /dev/zero is a character device", at("workload", {"kind": "jsonl", "path": "/dev/zero"})),
    Row("jsonl-dev-null-run", "workload.path: /dev/null is a character device", at("workload", {"kind": "jsonl", "path": "/dev/null"}), ("run", "{spec}", "--storage", "{storage}")),
    Row("jsonl-directory", "workload.path: . is a directory", at("workload", {"kind": "jsonl", "path": "."})),
    Row("model-config-fifo", "model.path: m/config.json is a FIFO", at("model.path", "m"), prepare=_fifo_at("m/config.json")),
    # ---- issue 53: CLI values checked before any storage is opened
    Row("gpus-arabic-indic", "--gpus '٣': give integers separated by commas (digits 0-9)", None, ("run", "{spec}", "--storage", "{storage}", "--gpus", "٣")),
    Row("gpus-fullwidth-node", "--gpus '０,１'", None, ("node", "tiny-cpu", "--storage", "{storage}", "--gpus", "０,１")),
    Row("gpus-huge", "--gpus '5000': 5000 is above 1023", None, ("run", "{spec}", "--storage", "{storage}", "--gpus", "5000"), pg=True),
    Row("gpus-worker-40-digits", "--gpus", None, ("worker", "tiny-cpu", "--storage", "{storage}", "--gpus", "9" * 40)),
    Row("stop-after-inf", "--stop-after inf: give a number from 1 to 2592000 seconds", None, ("run", "{spec}", "--storage", "{storage}", "--stop-after", "inf")),
    Row("stop-after-nan", "--stop-after nan", None, ("worker", "tiny-cpu", "--storage", "{storage}", "--stop-after", "nan")),
    Row("stop-after-zero", "--stop-after 0", None, ("run", "{spec}", "--storage", "{storage}", "--stop-after", "0")),
    Row("max-trials-huge", "--max-trials", None, ("worker", "tiny-cpu", "--storage", "{storage}", "--max-trials", "9" * 40)),
    Row("export-concurrency-40-digits", "--concurrency", None, ("export", "tiny-cpu", "--storage", "{storage}", "--concurrency", "9" * 40)),
    Row("export-concurrency-0", "--concurrency 0", None, ("export", "tiny-cpu", "--storage", "{storage}", "--concurrency", "0")),
    Row("node-grace-huge", "--grace", None, ("node", "tiny-cpu", "--storage", "{storage}", "--gpus", "0", "--grace", "1e300")),
    Row("worker-no-such-file", "the database file", None, ("worker", "tiny-cpu", "--storage", "{storage}")),
    Row("node-no-such-file", "the database file", None, ("node", "tiny-cpu", "--storage", "{storage}", "--gpus", "0")),
    Row("run-no-engine", "engine.python is not set", None, ("run", "{spec}", "--storage", "{storage}"), env={"NOVA_ENGINE_PYTHON": None}),
    # ---- issue 53: a SQLite path that is a FIFO or a device: refused, no lock file made
    Row("sqlite-fifo-create", "study.db is a FIFO (named pipe), not a SQLite database file", None, prepare=_fifo_at("study.db")),
    Row("sqlite-fifo-run", "is a FIFO (named pipe), not a SQLite database file", None, ("run", "{spec}", "--storage", "{storage}"), prepare=_fifo_at("study.db")),
    Row("sqlite-fifo-worker", "is a FIFO (named pipe), not a SQLite database file", None, ("worker", "tiny-cpu", "--storage", "{storage}"), prepare=_fifo_at("study.db")),
    Row("sqlite-fifo-upgrade", "is a FIFO (named pipe), not a SQLite database file", None, ("db", "upgrade", "--storage", "{storage}"), prepare=_fifo_at("study.db")),
    Row("sqlite-fifo-status", "is a FIFO (named pipe), not a SQLite database file", None, ("status", "tiny-cpu", "--storage", "{storage}"), prepare=_fifo_at("study.db")),
    Row("sqlite-dev-null", "/dev/null is a character device, not a SQLite database file", None, ("create", "{spec}", "--storage", "sqlite:////dev/null")),
    Row("sqlite-directory", "study.db is a directory, not a SQLite database file", None, prepare=lambda folder, storage: (folder / "study.db").mkdir()),
    # ---- issue 53: the engine.command may not carry nova's own flags either (whole words)
    Row("command-tp", "command.2: -tp is nova-search's to set", at("engine.command", ["vllm", "serve", "-tp", "8"]), pg=True),
    Row("command-served-name", "command.2: --served_model_name is nova-search's to set (--served-model-name:", at("engine.command", ["vllm", "serve", "--served_model_name=x"])),
    # ---- issue 53: the storage URL and the storage settings of the environment
    Row("storage-esc-flag", "--storage: the URL holds a control character (\\x1b)", None, ("create", "{spec}", "--storage", "sqlite:///a\x1b[2J.db")),
    Row("storage-bidi-spec", "storage: the URL holds a control character (\\u202e)", at("storage", "sqlite:///a\u202eb.db"), ("create", "{spec}")),
    Row("storage-esc-env", "NOVA_STORAGE: the URL holds a control character", None, ("status", "tiny-cpu"), env={"NOVA_STORAGE": "sqlite:///a\x1b]0;x\x07.db"}),
    Row("retry-s-text", "NOVA_STORAGE_RETRY_S='abc': give a number from 0 to 86400", None, env={"NOVA_STORAGE_RETRY_S": "abc"}, pg=True),
    Row("retry-s-nan", "NOVA_STORAGE_RETRY_S='nan'", None, ("run", "{spec}", "--storage", "{storage}"), env={"NOVA_STORAGE_RETRY_S": "nan"}),
    Row("retry-s-inf", "NOVA_STORAGE_RETRY_S='inf'", None, ("worker", "tiny-cpu", "--storage", "{storage}"), env={"NOVA_STORAGE_RETRY_S": "inf"}),
    Row("retry-s-negative", "NOVA_STORAGE_RETRY_S='-5'", None, ("db", "upgrade", "--storage", "{storage}"), env={"NOVA_STORAGE_RETRY_S": "-5"}),
    Row("heartbeat-text", "NOVA_HEARTBEAT_INTERVAL='abc': give a whole number", None, env={"NOVA_HEARTBEAT_INTERVAL": "abc"}),
    Row("grace-zero", "NOVA_GRACE_PERIOD='0'", None, ("run", "{spec}", "--storage", "{storage}"), env={"NOVA_GRACE_PERIOD": "0"}),
    Row("pool-one", "NOVA_DB_POOL_SIZE='1'", None, env={"NOVA_DB_POOL_SIZE": "1"}, pg=True),
    # ---- issue 53: where the server logs go, nova's own variables, the export's free text
    Row("artifacts-flag-fifo", "--artifacts-dir art: a FIFO (named pipe), not a folder", None, ("run", "{spec}", "--storage", "{storage}", "--artifacts-dir", "art"), prepare=_fifo_at("art")),
    Row("artifacts-flag-esc", "--artifacts-dir: holds a control character (\\x1b)", None, ("worker", "tiny-cpu", "--storage", "{storage}", "--artifacts-dir", "a\x1b[2J")),
    Row("artifacts-spec-fifo", "artifacts_dir: art is a FIFO (named pipe), not a folder", at("artifacts_dir", "art"), prepare=_fifo_at("art"), pg=True),
    Row("env-ref-nova-storage", "env.DB: ${NOVA_STORAGE} is nova-search's own variable", at("engine.env", {"DB": "${NOVA_STORAGE}"}), pg=True),
    Row("export-image-newline", "--image: the value holds a control character (\\n)", None, ("export", "tiny-cpu", "--storage", "{storage}", "--image", "img\n---\nkind: Pod")),
    Row("export-model-esc", "--model: the value holds a control character (\\x1b)", None, ("export", "tiny-cpu", "--storage", "{storage}", "--model", "m\x1b]0;x\x07")),
]  # fmt: skip


# ---------------------------------------------------------------- running them


@dataclass
class Outcome:
    code: int | None
    took: float
    stderr: str
    stdout: str
    before: list[tuple[str, int]]
    after: list[tuple[str, int]]


def _nova(argv: list[str], cwd: Path, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NOVA_STORAGE", "NOVA_ENGINE_PYTHON")}
    # an engine named (run refuses a spec with none before it opens the storage): each row's own input
    # is what is refused; a row that removes it sees that refusal
    base.update(NOVA_STORAGE_RETRY_S="2", PYTHONPATH=str(REPO), NOVA_ENGINE_PYTHON=sys.executable)
    for k, v in env.items():
        if v is None:
            base.pop(k, None)
        else:
            base[k] = v
    # the 4 GiB cap: a row that would fill the memory (0-100000000 cores) fails, not the machine
    cmd = ["bash", "-c", 'ulimit -v 4194304; exec "$@"', "nova", sys.executable, "-m", "nova_search", *argv]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=KILL_S, env=base)


def _listing(folder: Path) -> list[tuple[str, int]]:
    """Every entry under ``folder`` with its size (a FIFO or a socket: 0), links not followed."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            p = Path(root) / name
            out.append((str(p.relative_to(folder)), p.lstat().st_size))
    return sorted(out)


def _run_row(row: Row, folder: Path, storage: str) -> Outcome:
    folder.mkdir(parents=True)
    spec = folder / "spec.yaml"
    if isinstance(row.spec, bytes):
        spec.write_bytes(row.spec)
    else:
        raw = copy.deepcopy(TINY)
        if row.spec is not None:
            row.spec(raw)
        spec.write_text(yaml.safe_dump(raw, allow_unicode=True, width=1 << 30))
    if row.prepare is not None:
        row.prepare(folder, storage)
    before = _listing(folder)
    fill = {"{spec}": str(spec), "{storage}": storage, "{dir}": str(folder)}
    argv = [fill.get(a, a) for a in row.argv]
    t0 = time.perf_counter()
    try:
        r = _nova(argv, folder, row.env)
        code, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, str(e.stdout or ""), f"killed after {KILL_S} s: {e.stderr or ''}"
    took = time.perf_counter() - t0
    return Outcome(code, took, err, out, before, _listing(folder))


CASES = [(row, "sqlite") for row in ROWS] + [(row, "postgresql") for row in ROWS if row.pg]


def _pg_tables(url: str) -> list[str]:
    libpq = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(libpq, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    return [r[0] for r in rows]


@dataclass
class Batch:
    outcomes: dict[tuple[str, str], Outcome]
    pg_tables: list[str]
    wall_s: float


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    root = tmp_path_factory.mktemp("hostile")
    with fresh_database() as pg_url:

        def one(case: tuple[Row, str]) -> tuple[tuple[str, str], Outcome]:
            row, backend = case
            folder = root / backend / row.id
            storage = f"sqlite:///{folder / 'study.db'}" if backend == "sqlite" else pg_url
            return (row.id, backend), _run_row(row, folder, storage)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = dict(pool.map(one, CASES))
        # a refusal that took longer than the bound is run once more, alone: on a machine loaded by
        # others a half-second refusal can wait seconds for a core. An input that is slow itself is
        # slow twice, and fails
        for row, backend in CASES:
            if outcomes[(row.id, backend)].took >= BOUND_S:
                again = root / "again" / backend / row.id
                storage = f"sqlite:///{again / 'study.db'}" if backend == "sqlite" else pg_url
                outcomes[(row.id, backend)] = _run_row(row, again, storage)
        wall = time.perf_counter() - t0
        yield Batch(outcomes, _pg_tables(pg_url), wall)
    shutil.rmtree(root, ignore_errors=True)


def test_the_table_is_big_enough():
    ids = [r.id for r in ROWS]
    assert len(ids) >= 100 and len(set(ids)) == len(ids), len(ids)


@pytest.mark.parametrize(("row", "backend"), CASES, ids=[f"{r.id}-{b}" for r, b in CASES])
def test_hostile_input_exits_2_fast_naming_the_field_and_writes_nothing(batch: Batch, row: Row, backend: str):
    o = batch.outcomes[(row.id, backend)]
    said = " ".join((o.stderr + o.stdout).split())
    held = (
        o.code == 2
        and o.took < BOUND_S
        and "Traceback" not in o.stderr
        and " ".join(row.needle.split()) in said
        and o.after == o.before
        and (backend != "postgresql" or batch.pg_tables == [])
    )
    note("spec reader and create", f"{row.id} ({backend})", refused=int(held), tried=1)
    assert o.code == 2, (row.id, o.code, said[-2000:])
    assert o.took < BOUND_S, (row.id, f"{o.took:.1f} s")
    assert "Traceback" not in o.stderr, o.stderr[-3000:]
    assert " ".join(row.needle.split()) in said, (row.id, said[-2000:])
    assert o.after == o.before, (row.id, "wrote", sorted(set(o.after) - set(o.before)))
    if backend == "postgresql":
        assert batch.pg_tables == [], batch.pg_tables  # no schema, no study, no row
