"""The summary of benchmarks/gpu/moe_eagle3.sh's rows (issue 43): per concurrency level and acceptance
length, output tok/s with and without the EAGLE-3 head and the gain, beside the reference study's
curve. One window a level: a gain without an interval, so no verdict and no break-even length.

    python -m benchmarks.gpu.moe_eagle3_summary benchmarks/results/h200-qwen3-30b-a3b-eagle3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: ../shared/REFERENCE-STUDY.md: Qwen3-30B-A3B with EAGLE-3, k=3, against the tuned baseline
REFERENCE = {32: "+21.9 %", 512: "parity"}


def rows(path: Path) -> dict[int, float]:
    out: dict[int, float] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[int(r["concurrency"])] = float(r["output_throughput"])
    return out


def summarize(folder: Path) -> dict:
    base = rows(folder / "none.jsonl")
    cold = rows(folder / "none-nowarmup.jsonl")
    lengths = sorted(float(p.stem.removeprefix("eagle3-L")) for p in folder.glob("eagle3-L*.jsonl"))
    levels = []
    for c in sorted(base):
        cell: dict = {"concurrency": c, "none_tok_s": round(base[c], 1), "none_cold_tok_s": round(cold[c], 1)}
        cell["reference"] = REFERENCE.get(c)
        cell["by_length"] = []
        for length in lengths:
            drafted = rows(folder / f"eagle3-L{length:g}.jsonl").get(c)
            if drafted is None:
                continue
            cell["by_length"].append(
                {
                    "acceptance_length": length,
                    "projected": True,
                    "tok_s": round(drafted, 1),
                    "gain_pct": round(100 * (drafted / base[c] - 1), 1),
                    "interval": None,
                    "verdict": "not judged: one window a level",
                }
            )
        levels.append(cell)
    return {
        "schema": "h200-moe-eagle3/1",
        "target": "Qwen3-30B-A3B shape (Qwen3MoeForCausalLM, dummy weights)",
        "drafter": "EAGLE-3 head, 1 layer, random weights, k=3, synthetic acceptance",
        "windows_per_level": 1,
        "break_even_length": None,
        "levels": levels,
    }


def markdown(summary: dict) -> str:
    lengths = sorted({b["acceptance_length"] for c in summary["levels"] for b in c["by_length"]})
    head = "| concurrency | no drafter tok/s | " + " | ".join(
        f"EAGLE-3 k=3, projected at L={x:g}: tok/s (gain)" for x in lengths
    )
    lines = [head + " | reference study |", "|---:|---:|" + "---:|" * len(lengths) + "---|"]
    for c in summary["levels"]:
        cells = [f"{b['tok_s']:.0f} ({b['gain_pct']:+.1f} %)" for b in c["by_length"]]
        lines.append(
            f"| {c['concurrency']} | {c['none_tok_s']:.0f} | "
            + " | ".join(cells)
            + f" | {c['reference'] or ''} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    summary = summarize(args.folder)
    (args.folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(markdown(summary))


if __name__ == "__main__":
    main()
