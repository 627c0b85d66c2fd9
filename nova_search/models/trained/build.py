"""Build the trained CPU pair: a target model and a draft model that share one tokenizer, trained
here from the local corpus (``corpus``), and a workload of held-out text.

The stages, each a function of the one before:
1. ``corpus.split(corpus.corpus_files())``: train and held-out files;
2. a byte-level BPE tokenizer of ``VOCAB`` ids trained on the train files (``tinymodel.build_tokenizer``);
3. the two token arrays (``corpus.encode``);
4. the target, trained on the text (``train.py``, run by the engine's interpreter: it has torch);
5. the draft, trained on the text and on the target's next-token distribution;
6. ``workload.jsonl``: held-out prompts with their real continuations.

The folder it writes (``OUT``) is a model folder vLLM serves with real weights; ``OUT/draft`` is the
drafter (``speculative.drafters.draft_model``); ``OUT/report.json`` records the corpus, each model's
training and held-out loss, and the ``key`` of everything that made it (the plan, these sources, the
corpus's file list), so a folder with the same key is not built again. It is built beside ``OUT``
and renamed into place: nothing half-written is ever at ``OUT``.
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from nova_search.errors import EngineError, SpecError
from nova_search.models import tiny as tinymodel
from nova_search.models.trained import corpus
from nova_search.search.host import cpu_info

VOCAB = 4096
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
TRAIN_SCRIPT = Path(__file__).with_name("train.py")
EAGLE3_SCRIPT = Path(__file__).with_name("train_eagle3.py")

_COMMON = {
    "vocab_size": VOCAB,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 64,
}
#: the target: 4 layers of 256 (4.4M parameters)
TARGET = {**_COMMON, "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
#: the draft: 1 layer of 128 (1.2M parameters, most of them the embeddings and the head)
DRAFT = {**_COMMON, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 1}  # fmt: skip

#: the EAGLE-3 head: one layer at the target's width, reading the residual stream at the inputs of
#: layers 1, 2 and 3 (vLLM's default ids assume a deeper model)
EAGLE3_AUX_LAYERS = [1, 2, 3]
EAGLE3 = {
    **TARGET,
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "num_hidden_layers": 1,
    "draft_vocab_size": VOCAB,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYERS},
}


#: the GPU pair (issue 17, on an H200): a target of 12 layers of 768 (82M parameters), a draft of 2
#: layers of 512 (10M), an EAGLE-3 head at the target's width reading layers 2, 6 and 9 (vLLM's
#: default ids for 12 layers)
GPU_TARGET = {**_COMMON, "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12,
              "num_attention_heads": 12, "num_key_value_heads": 4}  # fmt: skip
GPU_DRAFT = {**_COMMON, "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 2,
             "num_attention_heads": 8, "num_key_value_heads": 4}  # fmt: skip
GPU_EAGLE3 = {**EAGLE3, **{k: GPU_TARGET[k] for k in ("hidden_size", "intermediate_size",
              "num_attention_heads", "num_key_value_heads")},
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 6, 9]}}  # fmt: skip


@dataclass(frozen=True)
class TrainPlan:
    """How long each model trains, on what windows, from which seed, on which device."""

    seed: int = 0
    target_steps: int = 300
    draft_steps: int = 200
    eagle3_steps: int = 150
    batch: int = 16
    seq_len: int = 256
    lr: float = 3e-3
    warmup: int = 20
    #: held-out workload: prompt and continuation sizes (characters), and the most records
    prompt_chars: int = 1000
    answer_chars: int = 400
    records: int = 400
    target: dict = field(default_factory=lambda: dict(TARGET))
    draft: dict = field(default_factory=lambda: dict(DRAFT))
    eagle3: dict = field(default_factory=lambda: dict(EAGLE3))
    #: "cpu", or "cuda" (bf16 autocast)
    device: str = "cpu"
    #: the most seconds each model may train (target, draft, eagle3); fewer steps run when the first
    #: ones show the planned steps would not fit. None: no limit (the CPU pair: its steps are its plan)
    budgets_s: tuple[float, float, float] | None = None


def gpu_plan(seed: int = 0) -> TrainPlan:
    """The GPU pair: under 5 minutes of training on one H200 (170 s for the target, 55 s for each
    drafter, leaving room for their start-up and held-out evaluation)."""
    return TrainPlan(
        seed=seed,
        target_steps=4000,
        draft_steps=2000,
        eagle3_steps=2000,
        batch=32,
        seq_len=512,
        lr=1e-3,
        warmup=100,
        target=dict(GPU_TARGET),
        draft=dict(GPU_DRAFT),
        eagle3=dict(GPU_EAGLE3),
        device="cuda",
        budgets_s=(170.0, 55.0, 55.0),
    )


def default_dir() -> Path:
    """Where the test suite keeps the pair between runs: ``NOVA_TRAINED_DIR``, else the user's cache."""
    if os.environ.get("NOVA_TRAINED_DIR"):
        return Path(os.environ["NOVA_TRAINED_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "nova-search" / "trained-cpu"


def plan_key(plan: TrainPlan, files: list[Path]) -> str:
    """What the pair is a function of: the plan, the sources that train it and cut the corpus (not this
    orchestration), and the corpus file list."""
    h = hashlib.sha256(json.dumps(asdict(plan), sort_keys=True).encode())
    for src in (TRAIN_SCRIPT, EAGLE3_SCRIPT, Path(corpus.__file__), Path(tinymodel.__file__)):
        h.update(src.read_bytes())
    for f in files:
        h.update(f"{corpus._name(f)}:{f.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def kept(out: Path, key: str) -> dict | None:
    """The report of the pair at ``out`` when it was built with ``key``, else None."""
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("key") == key else None


def build_trained_pair(
    out_dir: str | Path, engine_python: str, plan: TrainPlan | None = None, packages: Path | None = None
) -> dict:
    """Build (or keep, when its key matches) the pair at ``out_dir``; return its report. The corpus is
    the standard library and the licence texts, or the sources of the packages under ``packages``."""
    plan = plan or TrainPlan()
    out = Path(out_dir)
    try:
        files = corpus.package_files(packages) if packages else corpus.corpus_files()
    except RuntimeError as e:
        raise SpecError(f"--corpus: {e}") from None
    key = plan_key(plan, files)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        lock = open(out.parent / f".{out.name}.lock", "w")  # noqa: SIM115 - held for the whole build
    except OSError as e:
        raise SpecError(f"DIR: cannot write the pair into {out}: {e.strerror}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second build of the same folder waits, then keeps the first's
        if (report := kept(out, key)) is not None:
            return report
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            report = _build(work / "pair", work, files, plan, key, engine_python)
            if out.exists():
                shutil.rmtree(out)
            os.replace(work / "pair", out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return report


def _build(out: Path, work: Path, files: list[Path], plan: TrainPlan, key: str, engine_python: str) -> dict:
    from tokenizers import Tokenizer

    t0 = time.monotonic()
    split = corpus.split(files)
    out.mkdir()
    tinymodel.build_tokenizer(out, [str(f) for f in split.train], vocab=VOCAB)
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

    tokens = {
        "train": corpus.encode(encode_batch, split.train),
        "held_out": corpus.encode(encode_batch, split.held_out),
    }
    np.save(work / "train.npy", tokens["train"])
    np.save(work / "held.npy", tokens["held_out"])
    budgets = plan.budgets_s or (None, None, None)
    target = _train(
        engine_python, work, "target", out, plan, plan.target, plan.target_steps, None, budgets[0]
    )
    draft = _train(
        engine_python,
        work,
        "draft",
        _beside(out, "draft"),
        plan,
        plan.draft,
        plan.draft_steps,
        out,
        budgets[1],
    )
    eagle3 = _train_eagle3(engine_python, work, out, plan, budgets[2])
    records = corpus.workload_records(
        [corpus.read(f) for f in split.held_out], plan.prompt_chars, plan.answer_chars, plan.records
    )
    (out / "workload.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    report = {
        "key": key,
        "plan": asdict(plan),
        "corpus": {
            **split.manifest(),
            "tokens": {side: len(ids) for side, ids in tokens.items()},
        },
        "workload_records": len(records),
        "target": target,
        "draft": draft,
        "eagle3": eagle3,
        "build_seconds": round(time.monotonic() - t0, 1),
        "host": {
            "machine": platform.machine(),
            "cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            **cpu_facts(),
        },
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


#: instruction sets whose kernels round differently: a seeded CPU build repeats exactly on one host,
#: and not across hosts that differ in these (the trained-cpu results README has the case)
_ISA = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16")


def cpu_facts(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """The host's CPU model and which of ``_ISA`` it has, read at build time (empty where unreadable)."""
    info = cpu_info(cpuinfo)
    if info is None:
        return {}
    name, flags = info
    return {"cpu": name or "unknown", "isa": [f for f in _ISA if f in flags]}


def _beside(target: Path, name: str) -> Path:
    """A drafter's folder inside the target's, with the target's tokenizer (the pair shares it)."""
    out = target / name
    out.mkdir()
    for file in TOKENIZER_FILES:
        shutil.copy(target / file, out / file)
    return out


def _train(
    engine_python: str,
    work: Path,
    name: str,
    out: Path,
    plan: TrainPlan,
    config: dict,
    steps: int,
    teacher: Path | None,
    budget_s: float | None,
) -> dict:
    job = {
        **_job(work, plan, out, budget_s),
        "config": config,
        "teacher": str(teacher) if teacher else None,
        "steps": steps,
    }
    report = _run(engine_python, TRAIN_SCRIPT, work, name, job)
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, indent=2)
    )
    return report


def _train_eagle3(
    engine_python: str, work: Path, target: Path, plan: TrainPlan, budget_s: float | None
) -> dict:
    job = {
        **_job(work, plan, _beside(target, "eagle3"), budget_s),
        "target": str(target),
        "config": plan.eagle3,
        "aux_layers": plan.eagle3["eagle_config"]["eagle_aux_hidden_state_layer_ids"],
        "steps": plan.eagle3_steps,
    }
    return _run(engine_python, EAGLE3_SCRIPT, work, "eagle3", job)


def _job(work: Path, plan: TrainPlan, out: Path, budget_s: float | None) -> dict:
    extra = {} if plan.device == "cpu" else {"device": plan.device}
    if budget_s is not None:
        extra["time_budget_s"] = budget_s
    return {
        **extra,
        "train": str(work / "train.npy"),
        "held_out": str(work / "held.npy"),
        "batch": plan.batch,
        "seq_len": plan.seq_len,
        "lr": plan.lr,
        "warmup": plan.warmup,
        "seed": plan.seed,
        "out": str(out),
    }


def _run(engine_python: str, script: Path, work: Path, name: str, job: dict) -> dict:
    """Run one training script; its progress lines go on to stderr, prefixed with ``name``."""
    job_file = work / f"{name}.json"
    job_file.write_text(json.dumps(job))
    proc = subprocess.Popen(
        [engine_python, str(script), str(job_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    last: collections.deque[str] = collections.deque(maxlen=40)
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        last.append(line)
        if line.startswith("step "):
            print(f"[{name}] {line}", end="", file=sys.stderr, flush=True)
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise EngineError(
            f"training the {name} failed (exit {proc.returncode}): {''.join(last).strip()[-2000:]}"
        )
    return json.loads(out.strip().splitlines()[-1])


def summary_lines(report: dict, out: Path) -> list[str]:
    """What ``nova-search trained-model`` prints: each model's size and what it reached."""
    target, draft, eagle3 = report["target"], report["draft"], report["eagle3"]
    return [
        f"target: {target['parameters'] / 1e6:.1f}M parameters, held-out loss {target['held_out_loss']:.3f} "
        f"(perplexity {target['held_out_perplexity']:g})",
        f"draft: {draft['parameters'] / 1e6:.1f}M parameters, held-out loss {draft['held_out_loss']:.3f}, "
        f"top-1 agreement with the target {draft['held_out_top1_agreement']:.1%}",
        f"eagle3: {eagle3['parameters'] / 1e6:.1f}M parameters, top-1 agreement with the target "
        f"{eagle3['held_out_top1_agreement_step1']:.1%} (first step), "
        f"{eagle3['held_out_top1_agreement_step2']:.1%} (second)",
        f"written to {out} (drafters in {out / 'draft'} and {out / 'eagle3'}, "
        f"workload {out / 'workload.jsonl'}, report {out / 'report.json'})",
    ]
