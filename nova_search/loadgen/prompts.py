"""Seeded prompts for the load generator, one ``PromptSource`` per ``workload.kind``.

- ``synthetic``: random token ids sent to /v1/completions, so input lengths are exact without a
  tokenizer; ``ignore_eos`` with ``max_tokens`` makes output lengths exact. Ids are drawn from
  [3, 0.99 * vocab): the lowest ids and the top of the vocabulary are where models keep their
  special tokens.
- ``shared_prefix``: ``num_prefixes`` random prefixes of ``prefix_len`` tokens, drawn once from
  ``workload.seed`` (the same system prompts at every level), each request one of them followed by
  its own random suffix of ``input_len`` tokens.
- ``jsonl``: conversations from a file (OpenAI ``messages`` or ShareGPT ``conversations``), each up to
  its last user turn, tokenized with the model's tokenizer once, then shuffled per seed.
- ``trace``: a production trace's requests in its order, shared prefix blocks and all
  (``loadgen.trace`` reads it, ``loadgen.replay`` makes its prompts and schedule).

With ``endpoint: chat`` a prompt carries ``messages`` and goes to /v1/chat/completions. Synthetic
text is made of random tokens decoded with the tokenizer and re-encoded until its own tokenization
has exactly the wanted length, so each message's content is that many tokens (the server adds the
chat template's tokens on top; the records take the prompt length from the server's usage).

Every source is seeded: ``source.prompts(seed)`` gives the same endless stream for the same seed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nova_search.errors import SpecError
from nova_search.files import (
    MAX_CONFIG_BYTES,
    MAX_TOKENIZER_BYTES,
    MAX_WORKLOAD_BYTES,
    UnreadableFile,
    read_text_bounded,
)
from nova_search.loadgen.inputs import Message, Prompt, PromptSource, id_range
from nova_search.loadgen.replay import TraceSource
from nova_search.loadgen.trace import read_trace
from nova_search.spec import LenRange, ModelSpec, NormalLen, WorkloadSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer


def vocab_size(model: ModelSpec) -> int:
    if model.vocab_size is not None:
        return model.vocab_size
    cfg = Path(model.path) / "config.json"
    try:
        data = json.loads(read_text_bounded(cfg, MAX_CONFIG_BYTES))
    except (OSError, ValueError) as e:
        why = f" ({e})" if isinstance(e, UnreadableFile) else ""
        raise SpecError(
            f"model.vocab_size: not given and {cfg} cannot be read{why}; set model.vocab_size "
            "for synthetic prompts"
        ) from None
    if not isinstance(data, dict):
        raise SpecError(f"model.vocab_size: {cfg} is not a JSON object; set model.vocab_size")
    v = data.get("vocab_size") or data.get("text_config", {}).get("vocab_size")
    if not isinstance(v, int):
        raise SpecError(f"model.vocab_size: {cfg} has no integer vocab_size; set model.vocab_size")
    return v


def level_seed(base: int, level_index: int, repeat: int = 0, warmup: bool = False) -> int:
    """A different seed per level, repeat and phase, so the prefix cache never sees a prompt twice."""
    return base * 1_000_003 + level_index * 1_009 + repeat * 7 + (1 if warmup else 0) * 104_729


# ---------------------------------------------------------------- lengths


def sample_length(rng: np.random.Generator, spec: int | LenRange | NormalLen) -> int:
    """One length: fixed, uniform on [low, high], or normal rounded and clipped (at least 1)."""
    if isinstance(spec, LenRange):
        return int(rng.integers(spec.low, spec.high + 1))
    if isinstance(spec, NormalLen):
        n = int(round(float(rng.normal(spec.mean, spec.std))))
        if spec.low is not None:
            n = max(n, spec.low)
        if spec.high is not None:
            n = min(n, spec.high)
        return max(n, 1)
    return spec


# ---------------------------------------------------------------- tokenizer


def tokenizer_file(workload: WorkloadSpec, model: ModelSpec) -> Path:
    """Where the tokenizer is: ``workload.tokenizer`` (a folder or the file), else ``model.path``."""
    base = Path(workload.tokenizer if workload.tokenizer is not None else model.path)
    return base if base.suffix == ".json" else base / "tokenizer.json"


def load_tokenizer(workload: WorkloadSpec, model: ModelSpec, needed_by: str) -> Tokenizer:
    """The tokenizer, or a SpecError naming ``needed_by`` (the field that made it necessary)."""
    from tokenizers import Tokenizer

    path = tokenizer_file(workload, model)
    if not path.is_file():
        where = "workload.tokenizer" if workload.tokenizer is not None else "model.path"
        raise SpecError(
            f"{needed_by} needs a tokenizer, and there is no {path} ({where}); "
            "set workload.tokenizer to a folder with tokenizer.json"
        )
    try:
        # read here, bounded (a FIFO would block the tokenizers library's own read for good)
        text = read_text_bounded(path, MAX_TOKENIZER_BYTES)
    except (OSError, ValueError) as e:
        raise SpecError(f"workload.tokenizer: cannot read {path}: {e}") from None
    try:
        return Tokenizer.from_str(text)
    except Exception as e:  # noqa: BLE001 - the tokenizers library raises plain Exceptions
        raise SpecError(f"workload.tokenizer: cannot load {path}: {e}") from None


def _encode(tok: Tokenizer, texts: Sequence[str], special: bool) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=special)] if texts else []


class _TextMaker:
    """Random text of an exact token length, for prompts sent as text (endpoint chat).

    Ids are drawn from the "clean" tokens of [low, high): those that decode to whole characters and
    encode back to themselves. Their text is re-encoded (neighbours may merge) and cut or topped up
    until its own tokenization has the wanted length: one or two passes, 16 at most (best effort)."""

    def __init__(self, tok: Tokenizer, low: int, high: int) -> None:
        self.tok = tok
        ids = list(range(low, max(low + 1, min(high, tok.get_vocab_size(with_added_tokens=False)))))
        texts = tok.decode_batch([[i] for i in ids], skip_special_tokens=True)
        back = tok.encode_batch(texts, add_special_tokens=False)
        clean = [
            i for i, t, e in zip(ids, texts, back, strict=True) if t and "\ufffd" not in t and e.ids == [i]
        ]
        self.pool = np.array(clean or ids)

    def make(self, rng: np.random.Generator, n: int) -> tuple[str, tuple[int, ...]]:
        ids = [int(x) for x in rng.choice(self.pool, size=n)]
        text, again = "", ids
        for _ in range(16):
            text = self.tok.decode(ids, skip_special_tokens=True)
            again = self.tok.encode(text, add_special_tokens=False).ids
            if len(again) == n:
                break
            # too long: keep a shorter head (the tail may end inside a character); too short: top up
            keep = again[: max(0, 2 * n - len(again))] if len(again) > n else again
            ids = keep + [int(x) for x in rng.choice(self.pool, size=n - len(keep))]
        return text, tuple(again)


# ---------------------------------------------------------------- synthetic


def synthetic(workload: WorkloadSpec, vocab: int, seed: int) -> Iterator[Prompt]:
    """An endless, seeded stream of random-id prompts for /v1/completions."""
    rng = np.random.default_rng(seed)
    low, high = id_range(vocab)
    assert workload.input_len is not None
    while True:
        n_in = sample_length(rng, workload.input_len)
        n_out = _output_len(rng, workload)
        ids = rng.integers(low, high, size=n_in)
        yield Prompt(token_ids=tuple(int(x) for x in ids), output_len=n_out)


def _output_len(rng: np.random.Generator, workload: WorkloadSpec) -> int:
    assert workload.output_len != "from_data"
    return sample_length(rng, workload.output_len)


class SyntheticSource:
    """Random ids (completions) or, with a tokenizer, text of exact token length: chat messages
    (endpoint chat), or a completions prompt (``prompt_format: text``, as ``vllm bench serve``'s
    random dataset sends it: the server tokenizes it, special tokens included, to ``input_len``)."""

    def __init__(self, workload: WorkloadSpec, vocab: int, tokenizer: Tokenizer | None = None) -> None:
        self.workload, self.vocab = workload, vocab
        self.text = _TextMaker(tokenizer, *id_range(vocab)) if tokenizer is not None else None
        #: tokens the server adds to a text completions prompt (a BOS, say): left room for
        self.specials = len(tokenizer.encode("", add_special_tokens=True).ids) if tokenizer is not None else 0

    def prompts(self, seed: int) -> Iterator[Prompt]:
        if self.text is None:
            yield from synthetic(self.workload, self.vocab, seed)
            return
        rng = np.random.default_rng(seed)
        assert self.workload.input_len is not None
        chat = self.workload.endpoint == "chat"
        while True:
            n_in = sample_length(rng, self.workload.input_len)
            n_out = _output_len(rng, self.workload)
            if chat:
                text, ids = self.text.make(rng, n_in)
                yield Prompt(token_ids=ids, output_len=n_out, messages=(Message("user", text),))
            else:
                text, ids = self.text.make(rng, max(1, n_in - self.specials))
                yield Prompt(token_ids=ids, output_len=n_out, text=text)


# ---------------------------------------------------------------- shared prefix


class SharedPrefixSource:
    """Prefixes drawn once from ``workload.seed`` (the same at every level and in the warmup, as
    system prompts are); per stream, the seed picks which prefix each request uses (round robin
    from a seeded start, or at random) and the suffixes. With a tokenizer (endpoint chat) the
    prefix is the system message and the suffix the user message."""

    def __init__(self, workload: WorkloadSpec, vocab: int, tokenizer: Tokenizer | None = None) -> None:
        assert workload.prefix_len is not None and workload.input_len is not None
        self.workload, self.vocab = workload, vocab
        self.text = _TextMaker(tokenizer, *id_range(vocab)) if tokenizer is not None else None
        rng = np.random.default_rng([workload.seed, 0x5EED])  # a stream apart from the per-level seeds
        low, high = id_range(vocab)
        prefixes: list[tuple[int, ...]] = []
        texts: list[str] = []
        for _ in range(workload.num_prefixes):
            if self.text is None:
                prefixes.append(tuple(int(x) for x in rng.integers(low, high, size=workload.prefix_len)))
            else:
                text, ids = self.text.make(rng, workload.prefix_len)
                prefixes.append(ids)
                texts.append(text)
        self.prefixes: tuple[tuple[int, ...], ...] = tuple(prefixes)
        self.prefix_texts: tuple[str, ...] = tuple(texts)

    def prompts(self, seed: int) -> Iterator[Prompt]:
        w = self.workload
        assert w.input_len is not None
        rng = np.random.default_rng(seed)
        low, high = id_range(self.vocab)
        n = len(self.prefixes)
        k = int(rng.integers(n))  # round robin from a seeded start
        while True:
            which = k % n if w.prefix_order == "round_robin" else int(rng.integers(n))
            k += 1
            n_in = sample_length(rng, w.input_len)
            n_out = _output_len(rng, w)
            if self.text is None:
                suffix = tuple(int(x) for x in rng.integers(low, high, size=n_in))
                yield Prompt(token_ids=self.prefixes[which] + suffix, output_len=n_out)
            else:
                text, suffix = self.text.make(rng, n_in)
                messages = (Message("system", self.prefix_texts[which]), Message("user", text))
                yield Prompt(token_ids=self.prefixes[which] + suffix, output_len=n_out, messages=messages)


# ---------------------------------------------------------------- jsonl conversations

_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
}
_OPENAI_ROLES = ("system", "developer", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Conversation:
    """A record reduced to what a request needs: the turns up to the last user turn, and the
    assistant's answer to it when the record has one."""

    messages: tuple[Message, ...]
    answer: str | None


def _content(value: Any) -> str | None:
    """An OpenAI message content: a string, or a list of parts whose text parts are joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [
            p if isinstance(p, str) else p.get("text")
            for p in value
            if isinstance(p, str) or (isinstance(p, dict) and p.get("type", "text") == "text")
        ]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)  # type: ignore[arg-type]
    return None


def parse_record(record: Any) -> Conversation | None:
    """An OpenAI chat record (``{"messages": [{"role", "content"}, ...]}``) or a ShareGPT one
    (``{"conversations": [{"from": "human"|"gpt", "value"}, ...]}``); None when it is neither, has a
    role other than system/developer/user/assistant, or has no non-blank user turn."""
    if not isinstance(record, dict):
        return None
    turns: list[Message] = []
    if isinstance(record.get("messages"), list):
        for m in record["messages"]:
            if not isinstance(m, dict) or m.get("role") not in _OPENAI_ROLES:
                return None
            content = _content(m.get("content"))
            if content is None:
                return None
            turns.append(Message(m["role"], content))
    elif isinstance(record.get("conversations"), list):
        for m in record["conversations"]:
            if not isinstance(m, dict):
                return None
            role = _SHAREGPT_ROLES.get(str(m.get("from", "")).lower())
            if role is None or not isinstance(m.get("value"), str):
                return None
            turns.append(Message(role, m["value"]))
    else:
        return None
    users = [i for i, t in enumerate(turns) if t.role == "user" and t.content.strip()]
    if not users:
        return None
    last = users[-1]
    after = turns[last + 1] if last + 1 < len(turns) else None
    answer = after.content if after is not None and after.role == "assistant" else None
    return Conversation(messages=tuple(turns[: last + 1]), answer=answer)


def read_records(path: str | Path) -> list[Any]:
    """The records of a .jsonl file (one JSON value a line; blank lines skipped) or of a file that is
    one JSON array (as ShareGPT is distributed). Errors name ``workload.path``."""
    p = Path(path)
    try:
        text = read_text_bounded(p, MAX_WORKLOAD_BYTES)
    except UnreadableFile as e:
        raise SpecError(f"workload.path: {e}; give a .jsonl or JSON file") from None
    except OSError as e:
        raise SpecError(f"workload.path: cannot read {p}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"workload.path: {p} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SpecError(f"workload.path: {p} is not valid JSON: {e}") from None
        return list(data)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            raise SpecError(f"workload.path: {p} line {number} is not valid JSON: {e}") from None
    return records


@dataclass(frozen=True)
class JsonlStats:
    records: int
    usable: int
    unparsed: int  # neither format, an unknown role, or no user turn
    no_answer: int  # output_len: from_data and no reference answer (or an empty one)
    too_long: int  # longer than input_len with truncate: false
    truncated: int  # cut to input_len with truncate: true


class JsonlSource:
    """Every usable record tokenized once; ``prompts(seed)`` shuffles them with the seed (again each
    time the file is used up) and draws output lengths, unless ``output_len: from_data``: then each
    prompt's ``output_len`` is its reference answer's length in tokens."""

    def __init__(self, workload: WorkloadSpec, prompts: tuple[Prompt, ...], stats: JsonlStats) -> None:
        self.workload, self.items, self.stats = workload, prompts, stats

    def prompts(self, seed: int) -> Iterator[Prompt]:
        rng = np.random.default_rng(seed)
        from_data = self.workload.output_len == "from_data"
        while True:
            for i in rng.permutation(len(self.items)):
                p = self.items[int(i)]
                yield p if from_data else Prompt(p.token_ids, _output_len(rng, self.workload), p.messages)


def load_jsonl(workload: WorkloadSpec, tok: Tokenizer) -> JsonlSource:
    """Read, parse and tokenize ``workload.path``. For /v1/completions the prompt is the turns'
    contents joined by blank lines, tokenized as the server tokenizes a text prompt (special tokens
    included) and cut to its first ``input_len`` ids; for chat, the messages, counted as the sum of
    their contents' tokens and cut to the first ``input_len`` of them."""
    assert workload.path is not None
    records = read_records(workload.path)
    convs = [parse_record(r) for r in records]
    usable = [c for c in convs if c is not None]
    from_data = workload.output_len == "from_data"
    answers = _encode(tok, [c.answer or "" for c in usable], False) if from_data else [[1]] * len(usable)
    chat = workload.endpoint == "chat"
    limit = workload.input_len if isinstance(workload.input_len, int) else None
    pieces: list[list[list[int]]] = []  # chat: per record, per message, the content's ids
    if chat:
        encoded = iter(_encode(tok, [m.content for c in usable for m in c.messages], False))
        pieces = [[next(encoded) for _ in c.messages] for c in usable]
        whole = [[t for piece in ps for t in piece] for ps in pieces]
    else:
        whole = _encode(tok, ["\n\n".join(m.content for m in c.messages) for c in usable], True)
    items: list[Prompt] = []
    no_answer = too_long = truncated = 0
    for j, conv in enumerate(usable):
        ids = whole[j]
        if not answers[j]:
            no_answer += 1
            continue
        if limit is not None and len(ids) > limit:
            if not workload.truncate:
                too_long += 1
                continue
            truncated += 1
            ids = ids[:limit]
        messages = _cut_messages(tok, conv.messages, pieces[j], limit) if chat else ()
        items.append(Prompt(tuple(ids), len(answers[j]), messages))
    stats = JsonlStats(len(records), len(items), len(convs) - len(usable), no_answer, too_long, truncated)
    if not items:
        raise SpecError(
            f"workload.path: {workload.path} gives no usable prompt ({stats.records} records: "
            f"{stats.unparsed} neither OpenAI messages nor ShareGPT conversations with a user turn, "
            f"{stats.no_answer} without a reference answer for output_len from_data, "
            f"{stats.too_long} longer than input_len {limit} with truncate: false)"
        )
    return JsonlSource(workload, tuple(items), stats)


def _cut_messages(
    tok: Tokenizer, messages: tuple[Message, ...], pieces: list[list[int]], limit: int | None
) -> tuple[Message, ...]:
    """The first ``limit`` tokens of content: the message where they run out is cut (decoded back
    to text), the later ones dropped."""
    if limit is None or sum(len(p) for p in pieces) <= limit:
        return messages
    out: list[Message] = []
    left = limit
    for m, piece in zip(messages, pieces, strict=True):
        if left <= 0:
            break
        if len(piece) <= left:
            out.append(m)
        else:
            out.append(Message(m.role, tok.decode(piece[:left], skip_special_tokens=True)))
        left -= len(piece)
    return tuple(out)


# ---------------------------------------------------------------- the source for a spec


def prompt_source(workload: WorkloadSpec, model: ModelSpec) -> PromptSource:
    """The prompt source of a workload, loading what it needs (vocab size, tokenizer, file) once.
    Raises SpecError naming the field when the tokenizer or the file is missing or unusable."""
    chat = workload.endpoint == "chat"
    if workload.kind == "trace":
        assert workload.path is not None
        trace = read_trace(workload.path, workload.trace_format, workload.block_size)
        return TraceSource(workload, trace, vocab_size(model))
    if workload.kind == "jsonl":
        return load_jsonl(workload, load_tokenizer(workload, model, "workload.kind jsonl"))
    if chat:
        tok = load_tokenizer(workload, model, "workload.endpoint chat (it sends text)")
    elif workload.prompt_format == "text" and workload.kind == "synthetic":
        tok = load_tokenizer(workload, model, "workload.prompt_format text")
    else:
        tok = None
    vocab = tok.get_vocab_size(with_added_tokens=False) if tok is not None else vocab_size(model)
    if workload.kind == "shared_prefix":
        return SharedPrefixSource(workload, vocab, tok)
    return SyntheticSource(workload, vocab, tok)
