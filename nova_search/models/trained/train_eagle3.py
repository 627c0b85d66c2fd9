"""Train an EAGLE-3 head for the trained target, in the checkpoint layout vLLM's
``LlamaForCausalLMEagle3`` loads. Run by the engine's interpreter, stand-alone like ``train.py``
(whose batches and schedule it shares): ``python train_eagle3.py JOB.json``.

What the head computes, as vLLM 0.26-0.32 does (``model_executor/models/llama_eagle3.py``):
- the first draft step takes the target's residual stream at the inputs of the layers in
  ``eagle_aux_hidden_state_layer_ids``, concatenated, through ``fc`` to one hidden vector ``g``;
  later steps take the head's own pre-norm output instead;
- one decoder layer whose attention reads ``[input_layernorm(embed(token)), hidden_norm(g)]`` (twice
  the hidden size), with ``g`` as the residual;
- ``norm`` and ``lm_head`` give the next token; the embeddings are the target's (not saved, so vLLM
  shares the target's).

Training follows EAGLE-3's "training-time test" in short: step 1 from the target's features, step 2
from the head's own step-1 output, each learning the target's next-token distribution (KL) at its
position. The job is ``train.py``'s (``train``, ``held_out``, ``steps``, ``batch``, ``seq_len``,
``lr``, ``warmup``, ``seed``, ``out``) plus ``target`` (the target's folder), ``config`` (the head's
config.json) and ``aux_layers``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

sys.path.insert(0, str(Path(__file__).parent))
from train import EVAL_WINDOWS, autocast, device_of, fit  # noqa: E402


class Eagle3Head(nn.Module):
    def __init__(self, cfg: dict, n_aux: int) -> None:
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.heads, self.kv_heads, self.head_dim = (
            cfg["num_attention_heads"],
            cfg["num_key_value_heads"],
            cfg["head_dim"],
        )
        self.fc = nn.Linear(n_aux * h, h, bias=False)
        self.input_layernorm, self.hidden_norm = LlamaRMSNorm(h, eps), LlamaRMSNorm(h, eps)
        self.post_attention_layernorm, self.norm = LlamaRMSNorm(h, eps), LlamaRMSNorm(h, eps)
        self.q_proj = nn.Linear(2 * h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.gate_proj = nn.Linear(h, cfg["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(h, cfg["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(cfg["intermediate_size"], h, bias=False)
        self.lm_head = nn.Linear(h, cfg["draft_vocab_size"], bias=False)
        self.rotary = LlamaRotaryEmbedding(
            LlamaConfig(**{k: v for k, v in cfg.items() if k != "eagle_config"})
        )

    def step(
        self, embeds: torch.Tensor, g: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One draft step over a sequence: (logits, the pre-norm output the next step starts from)."""
        b, t, _ = embeds.shape
        residual = g
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(g)], dim=-1)
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(x, positions)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        h = self.o_proj(att.transpose(1, 2).reshape(b, t, -1)) + residual
        m = self.post_attention_layernorm(h)
        pre = self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m)) + h
        return self.lm_head(self.norm(pre)), pre

    def checkpoint(self) -> dict[str, torch.Tensor]:
        """The weights under the names EAGLE-3 checkpoints use (``midlayer.`` is vLLM's ``layers.0.``)."""
        names = {"fc": "fc", "norm": "norm", "lm_head": "lm_head"}
        for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
            names[n] = f"midlayer.{n}"
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names[n] = f"midlayer.self_attn.{n}"
        for n in ("gate_proj", "up_proj", "down_proj"):
            names[n] = f"midlayer.mlp.{n}"
        return {
            f"{names[m]}.weight": getattr(self, m).weight.detach().to(torch.bfloat16).cpu().contiguous()
            for m in names
        }


def target_features(
    target: LlamaForCausalLM, x: torch.Tensor, layers: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's log-probabilities and its residual stream at the inputs of ``layers`` (what vLLM
    hands an EAGLE-3 head), concatenated in layer order."""
    seen: dict[int, torch.Tensor] = {}
    hooks = [
        target.model.layers[i].register_forward_pre_hook(
            lambda _m, args, kwargs, i=i: seen.__setitem__(i, (args[0] if args else kwargs["hidden_states"])),
            with_kwargs=True,
        )
        for i in layers
    ]
    try:
        logprobs = F.log_softmax(target(input_ids=x).logits.float(), -1)
    finally:
        for hook in hooks:
            hook.remove()
    return logprobs, torch.cat([seen[i] for i in sorted(layers)], dim=-1)


def losses(head: Eagle3Head, embed: nn.Embedding, x: torch.Tensor, logprobs: torch.Tensor, aux: torch.Tensor):
    """Per step, the KL from the target's next-token distribution and the top-1 agreement with it.
    Step 1 at position t reads token t+1 and the target's features at t, and predicts token t+2;
    step 2 reads token t+2 and step 1's output at t, and predicts token t+3."""
    t = x.shape[1]
    pos = torch.arange(1, t, device=x.device).unsqueeze(0)
    out = []
    logits1, pre = head.step(embed(x[:, 1:]), head.fc(aux[:, :-1]), pos)
    want1 = logprobs[:, 1:]
    out.append((logits1, want1))
    logits2, _ = head.step(embed(x[:, 2:]), pre[:, :-1], pos[:, 1:])
    out.append((logits2, logprobs[:, 2:]))
    results = []
    for logits, want in out:
        lp = F.log_softmax(logits.float(), -1)
        kl = F.kl_div(lp.flatten(0, 1), want.flatten(0, 1), log_target=True, reduction="batchmean")
        agree = (logits.argmax(-1) == want.argmax(-1)).float().mean()
        results.append((kl, agree))
    return results


def train(job: dict) -> dict:
    torch.manual_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    device = device_of(job)
    tokens, held = np.load(job["train"]), np.load(job["held_out"])
    target = LlamaForCausalLM.from_pretrained(job["target"], dtype=torch.float32).to(device).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    embed = target.model.embed_tokens
    layers = job["aux_layers"]
    head = Eagle3Head(job["config"], len(layers)).to(device)

    def loss_of(batch: torch.Tensor) -> torch.Tensor:
        x = batch[:, :-1]
        with torch.no_grad():
            logprobs, aux = target_features(target, x, layers)
        (kl1, _), (kl2, _) = losses(head, embed, x, logprobs, aux)
        return kl1 + 0.5 * kl2

    fitted = fit(head, job, rng, tokens, loss_of)
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    save_file(head.checkpoint(), str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(job["config"], indent=2))
    with torch.no_grad():  # held-out agreement with the target's greedy token, per step
        starts = np.linspace(0, len(held) - job["seq_len"] - 2, EVAL_WINDOWS).astype(np.int64)
        x = torch.from_numpy(np.stack([held[s : s + job["seq_len"]] for s in starts]).astype(np.int64))
        agree = [[], []]
        for chunk in x.to(device).split(16):
            with autocast(device):
                logprobs, aux = target_features(target, chunk, layers)
                pairs = losses(head, embed, chunk, logprobs, aux)
            for i, (_, a) in enumerate(pairs):
                agree[i].append(a.item())
    report = {
        "parameters": sum(p.numel() for n, p in head.named_parameters() if not n.startswith("rotary")),
        **fitted,
        "aux_layers": layers,
        "held_out_top1_agreement_step1": round(float(np.mean(agree[0])), 4),
        "held_out_top1_agreement_step2": round(float(np.mean(agree[1])), 4),
    }
    (out / "train.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    print(json.dumps(train(json.loads(Path(sys.argv[1]).read_text()))))
