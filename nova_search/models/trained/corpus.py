"""The text every machine has, as a corpus: Python's standard-library sources (of the interpreter
that builds the pair) and the system's licence texts (``/usr/share/common-licenses``, Debian's); for the
GPU pair, the Python sources of every package in one folder (``package_files``: the offline vLLM
bundle's site folder, the same files on the H200 and on the machine that made the bundle).

Pure functions over paths and strings:
- ``corpus_files`` lists the files, sorted (tests, site-packages and byte code left out);
- ``split`` holds out one file in ten, by a hash of its name, so the split does not move when a file
  is added or removed elsewhere;
- ``encode`` turns files into one token array, ``</s>`` between files (what the models train on);
- ``workload_records`` cuts held-out files into prompt/continuation pairs, OpenAI chat records with
  the real continuation as the assistant's answer (nova's ``jsonl`` workload reads them).
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LICENCES = Path("/usr/share/common-licenses")
#: standard-library folders that are not library source
_SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
EOS = 2  # "</s>", as in nova_search.models.tiny
#: folders whose files are named from them on (``package_files``' roots: the bundle's is ``site``)
_SITES = {"site", "site-packages", "dist-packages"}


@dataclass(frozen=True, slots=True)
class Corpus:
    train: tuple[Path, ...]
    held_out: tuple[Path, ...]

    def manifest(self) -> dict:
        """What the corpus was, to record beside the models: file counts and bytes per side."""
        return {
            side: {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}
            for side, files in (("train", self.train), ("held_out", self.held_out))
        }


def corpus_files(stdlib: Path | None = None, licences: Path = LICENCES) -> list[Path]:
    """The standard library's ``.py`` sources (``stdlib``: this interpreter's) and the licence texts."""
    root = stdlib or Path(sysconfig.get_paths()["stdlib"])
    sources = [p for p in root.rglob("*.py") if not _SKIP_PARTS & set(p.relative_to(root).parts)]
    texts = [p for p in licences.glob("*") if p.is_file()] if licences.is_dir() else []
    files = sorted(sources) + sorted(texts)
    if not files:
        raise RuntimeError(f"no corpus: no .py files under {root} and no licence texts in {licences}")
    return files


def package_files(root: Path) -> list[Path]:
    """Every ``.py`` file of the packages under ``root`` (a site folder), sorted; tests left out."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*.py") if not _SKIP_PARTS & set(p.relative_to(root).parts[:-1]))
    if not files:
        raise RuntimeError(f"no corpus: no .py files under {root}")
    return files


def held_out(name: str) -> bool:
    """One name in ten, by its SHA-1: the same file is held out on every machine."""
    return hashlib.sha1(name.encode()).digest()[0] % 10 == 0


def split(files: Sequence[Path]) -> Corpus:
    return Corpus(
        train=tuple(f for f in files if not held_out(_name(f))),
        held_out=tuple(f for f in files if held_out(_name(f))),
    )


def _name(path: Path) -> str:
    """A file by its place in the library (``json/decoder.py``) or in its site folder
    (``vllm/config/model.py``), not by the machine's prefix; a licence text by its file name."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].startswith("python3") or parts[i] in _SITES:
            return "/".join(parts[i + 1 :])
    return path.name


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def encode(encode_batch, files: Iterable[Path]) -> np.ndarray:
    """Every file's ids, ``</s>`` after each, as one uint16 array (``encode_batch``: texts -> id lists)."""
    ids = encode_batch([read(f) for f in files])
    return np.fromiter((t for doc in ids for t in (*doc, EOS)), dtype=np.uint16)


def workload_records(texts: Sequence[str], prompt_chars: int, answer_chars: int, limit: int) -> list[dict]:
    """Prompt/continuation pairs cut at line ends from each text in turn: a prompt of about
    ``prompt_chars`` characters, then its real continuation of about ``answer_chars``; at most
    ``limit`` records, taken round-robin over the texts so every held-out file contributes."""
    per_text = [_pairs(t, prompt_chars, answer_chars) for t in texts]
    records: list[dict] = []
    depth = 0
    while len(records) < limit and any(depth < len(p) for p in per_text):
        for pairs in per_text:
            if depth < len(pairs) and len(records) < limit:
                prompt, answer = pairs[depth]
                records.append(
                    {
                        "messages": [
                            {"role": "user", "content": prompt},
                            {"role": "assistant", "content": answer},
                        ]
                    }
                )
        depth += 1
    return records


def _pairs(text: str, prompt_chars: int, answer_chars: int) -> list[tuple[str, str]]:
    out = []
    at = 0
    while True:
        cut = text.find("\n", at + prompt_chars)
        end = text.find("\n", cut + answer_chars) if cut >= 0 else -1
        if cut < 0 or end < 0:
            return out
        prompt, answer = text[at : cut + 1], text[cut + 1 : end + 1]
        if prompt.strip() and answer.strip():
            out.append((prompt, answer))
        at = end + 1
