"""Train one small Llama on a token array, run by the engine's interpreter (it has torch and
transformers; nova's own environment need not). Stand-alone: it imports nothing of nova_search, so
``python train.py JOB.json`` works from an installed package as from a clone.

The job (JSON) names:
- ``train`` and ``held_out``: uint16 token files (``numpy.save``), the corpus with ``</s>`` between files;
- ``config``: the transformers ``LlamaConfig`` fields;
- ``teacher`` (optional): a model folder; then the student learns the teacher's next-token
  distribution (KL, temperature 1) beside the text's own next token, which is what a draft model
  needs: greedy acceptance is the share of positions where the draft's top token is the target's;
- ``steps``, ``batch``, ``seq_len``, ``lr``, ``warmup``, ``seed``, ``out``;
- ``device`` (optional, ``cpu`` by default): ``cuda`` trains on the GPU in bf16 autocast;
- ``time_budget_s`` (optional): when the first steps show that ``steps`` would not fit in it, the
  run takes fewer steps (its schedule shortened to match) and says so; ``steps`` in the report is what ran.

Everything random is drawn from ``seed`` (weights, batches); the run uses every core it may use. It
writes the model (safetensors, bf16, with generation_config.json) and ``train.json``: the loss curve,
held-out loss and perplexity, and, with a teacher, the held-out top-1 agreement with it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

EVAL_WINDOWS = 64
#: steps timed before a time budget is first judged (the first ones include CUDA's start-up)
TIMED_AFTER = 10
#: then judged again every so many steps, on the pace so far (a pace read from 10 steps alone let
#: the H200's target run 10 s over its 180 s)
RETIMED_EVERY = 250


def device_of(job: dict) -> torch.device:
    want = job.get("device", "cpu")
    if want == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device: cuda was asked for, but torch sees no GPU")
    if want == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    return torch.device(want)


def autocast(device: torch.device):
    """bf16 autocast on a GPU; nothing on the CPU (the CPU pair trains in float32, as it always has)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def batches(tokens: np.ndarray, rng: np.random.Generator, batch: int, seq_len: int) -> torch.Tensor:
    starts = rng.integers(0, len(tokens) - seq_len - 1, size=batch)
    return torch.from_numpy(np.stack([tokens[s : s + seq_len + 1] for s in starts]).astype(np.int64))


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < warmup:
        return lr * (step + 1) / warmup
    done = (step - warmup) / max(steps - warmup, 1)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))


@torch.no_grad()
def evaluate(
    model: LlamaForCausalLM, teacher: LlamaForCausalLM | None, held: np.ndarray, seq_len: int
) -> dict:
    """Held-out loss over fixed, evenly spaced windows (the same for every model of a corpus)."""
    model.eval()
    device = next(model.parameters()).device
    starts = np.linspace(0, len(held) - seq_len - 2, EVAL_WINDOWS).astype(np.int64)
    x = torch.from_numpy(np.stack([held[s : s + seq_len + 1] for s in starts]).astype(np.int64)).to(device)
    losses, agree, total = [], 0, 0
    for chunk in x.split(16):
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        losses.append(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum").item())
        if teacher is not None:
            top = teacher(input_ids=chunk[:, :-1]).logits.argmax(-1)
            agree += int((logits.argmax(-1) == top).sum())
        total += chunk[:, 1:].numel()
    model.train()
    loss = sum(losses) / total
    out = {"held_out_loss": round(loss, 4), "held_out_perplexity": round(math.exp(loss), 2), "tokens": total}
    if teacher is not None:
        out["held_out_top1_agreement"] = round(agree / total, 4)
    return out


def fit(model: torch.nn.Module, job: dict, rng: np.random.Generator, tokens: np.ndarray, loss_of) -> dict:
    """The loop every trainer here shares: AdamW, warm-up then cosine decay, gradients clipped at 1, a
    loss line on stderr every 25 steps. ``loss_of(batch)`` is the loss of one batch of windows of
    ``seq_len + 1`` tokens, on the model's device. Returns the report's training fields."""
    device = device_of(job)
    opt = torch.optim.AdamW(model.parameters(), lr=job["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    curve = []
    steps, budget = job["steps"], job.get("time_budget_s")
    t0 = time.monotonic()
    step = 0
    while step < steps:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, job["lr"], job["warmup"])
        with autocast(device):
            loss = loss_of(batches(tokens, rng, job["batch"], job["seq_len"]).to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if budget and (step in (0, TIMED_AFTER) or (step > TIMED_AFTER and step % RETIMED_EVERY == 0)):
            if device.type == "cuda":
                torch.cuda.synchronize()  # the GPU's work done, not only queued
            if step == 0:
                first = time.monotonic()  # the first step pays CUDA's and the allocator's start-up
            else:
                fitting = _within(
                    budget, step + 1, time.monotonic() - t0, (time.monotonic() - first) / step, job["steps"]
                )
                if fitting != steps:
                    print(
                        f"time budget {budget:.0f} s: {fitting} of {job['steps']} steps fit",
                        file=sys.stderr,
                        flush=True,
                    )
                steps = fitting
        if step % 25 == 0 or step == steps - 1:
            curve.append([step, round(loss.item(), 4)])
            print(
                f"step {step} loss {loss.item():.3f} ({time.monotonic() - t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        step += 1
    return {
        "steps": steps,
        "steps_planned": job["steps"],
        "tokens_seen": steps * job["batch"] * job["seq_len"],
        "train_seconds": round(time.monotonic() - t0, 1),
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "seed": job["seed"],
        "loss_curve": curve,
    }


def _within(budget: float, done: int, elapsed: float, pace: float, steps: int) -> int:
    """The steps that fit in ``budget`` seconds: the ``done`` ones took ``elapsed``, and the rest go at
    ``pace`` seconds a step; never more than the ``steps`` planned, never fewer than done."""
    return max(done + 1, min(steps, done + int((budget - elapsed) / pace)))


def train(job: dict) -> dict:
    torch.manual_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    device = device_of(job)
    tokens = np.load(job["train"])
    held = np.load(job["held_out"])
    model = LlamaForCausalLM(LlamaConfig(**job["config"])).to(device)
    teacher = None
    if job.get("teacher"):
        teacher = LlamaForCausalLM.from_pretrained(job["teacher"], dtype=torch.float32).to(device).eval()

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        if teacher is None:
            return loss
        with torch.no_grad():
            target = F.log_softmax(teacher(input_ids=x[:, :-1]).logits, -1)
        kl = F.kl_div(F.log_softmax(logits, -1), target, log_target=True, reduction="batchmean")
        return 0.5 * loss + kl / x.shape[1]

    fitted = fit(model, job, rng, tokens, loss_of)
    out = Path(job["out"])
    model.to(torch.bfloat16).cpu().save_pretrained(out, safe_serialization=True)
    model.float().to(device)  # held-out figures are the saved (bf16-rounded) weights'
    report = {
        "parameters": sum(p.numel() for p in model.parameters()),
        **fitted,
        **evaluate(model, teacher, held, job["seq_len"]),
    }
    (out / "train.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    print(json.dumps(train(json.loads(Path(sys.argv[1]).read_text()))))
