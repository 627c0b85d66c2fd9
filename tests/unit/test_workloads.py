"""Richer workloads: length distributions, shared prefixes, conversation files, chat text, arrivals.

Everything real: the tiny model's byte-level BPE tokenizer (``build_tiny_model``), real files.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from nova_search.errors import SpecError
from nova_search.loadgen.prompts import (
    JsonlSource,
    Message,
    Prompt,
    SharedPrefixSource,
    SyntheticSource,
    level_seed,
    parse_record,
    prompt_source,
    read_records,
    sample_length,
    synthetic,
)
from nova_search.spec import (
    ClosedArrival,
    LenRange,
    ModelSpec,
    NormalLen,
    PoissonArrival,
    StudySpec,
    WorkloadSpec,
    parse_spec,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nova_search.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", eagle3=False)


@pytest.fixture(scope="module")
def tok(tiny: Path) -> Tokenizer:
    return Tokenizer.from_file(str(tiny / "tokenizer.json"))


def W(**fields: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate(fields)


def take(source: Any, n: int, seed: int = 0) -> list[Prompt]:
    return list(itertools.islice(source.prompts(seed), n))


def encode(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def with_workload(raw: dict[str, Any], **workload: Any) -> StudySpec | str:
    raw["workload"] = workload
    try:
        return parse_spec(raw)
    except SpecError as e:
        return str(e)


def spec_error(raw: dict[str, Any], **workload: Any) -> str:
    out = with_workload(raw, **workload)
    assert isinstance(out, str), f"expected a SpecError for {workload}"
    return out


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def openai(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


def sharegpt(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"conversations": [{"from": f, "value": v} for f, v in turns]}


# ---------------------------------------------------------------- lengths


def test_length_forms_parse() -> None:
    assert W(input_len=7).input_len == 7
    old = W(input_len={"low": 2, "high": 9}).input_len
    assert isinstance(old, LenRange) and old.dist == "uniform"
    assert W(input_len={"dist": "uniform", "low": 2, "high": 9}).input_len == old
    normal = W(output_len={"dist": "normal", "mean": 50, "std": 10, "low": 5}).output_len
    assert isinstance(normal, NormalLen) and (normal.mean, normal.std, normal.low, normal.high) == (
        50,
        10,
        5,
        None,
    )


def test_uniform_lengths_have_the_uniform_stats() -> None:
    rng = np.random.default_rng(3)
    xs = np.array([sample_length(rng, LenRange(low=10, high=30)) for _ in range(20_000)])
    assert xs.min() == 10 and xs.max() == 30  # both ends inclusive
    assert xs.mean() == pytest.approx(20, abs=0.2)
    assert xs.std() == pytest.approx(np.sqrt((21**2 - 1) / 12), rel=0.03)


def test_normal_lengths_have_the_normal_stats() -> None:
    rng = np.random.default_rng(5)
    xs = np.array([sample_length(rng, NormalLen(dist="normal", mean=200, std=40)) for _ in range(20_000)])
    assert xs.dtype.kind == "i"
    assert xs.mean() == pytest.approx(200, abs=1.5)
    assert xs.std() == pytest.approx(40, rel=0.03)


def test_normal_lengths_are_clipped_and_at_least_one() -> None:
    rng = np.random.default_rng(0)
    clipped = [
        sample_length(rng, NormalLen(dist="normal", mean=50, std=30, low=40, high=60)) for _ in range(5000)
    ]
    assert min(clipped) == 40 and max(clipped) == 60
    assert 0.2 < clipped.count(40) / 5000 < 0.5  # the mass below low piles up at low
    tiny = [sample_length(rng, NormalLen(dist="normal", mean=1, std=5)) for _ in range(5000)]
    assert min(tiny) == 1
    assert sample_length(rng, NormalLen(dist="normal", mean=12, std=0)) == 12


def test_lengths_are_seeded_in_the_prompts() -> None:
    w = W(input_len={"dist": "normal", "mean": 64, "std": 16}, output_len={"low": 1, "high": 50})
    a = list(itertools.islice(synthetic(w, 1000, 11), 50))
    assert a == list(itertools.islice(synthetic(w, 1000, 11), 50))
    assert a != list(itertools.islice(synthetic(w, 1000, 12), 50))
    assert len({len(p.token_ids) for p in a}) > 10 and len({p.output_len for p in a}) > 10


def test_synthetic_prompts_are_unchanged_for_the_old_forms() -> None:
    """The same seed gives the same prompts as before the richer workloads (ids and lengths)."""
    w = W(input_len={"low": 4, "high": 8}, output_len=3)
    rng = np.random.default_rng(42)
    expected = []
    for _ in range(5):
        n_in = int(rng.integers(4, 9))
        ids = rng.integers(3, 990, size=n_in)
        expected.append(Prompt(tuple(int(x) for x in ids), 3))
    assert list(itertools.islice(synthetic(w, 1000, 42), 5)) == expected


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"dist": "normal", "mean": 10, "std": -1}, "workload.input_len.normal.std"),
        ({"dist": "normal", "mean": 0, "std": 1}, "workload.input_len.normal.mean"),
        ({"dist": "normal", "std": 1}, "workload.input_len.normal.mean"),
        ({"dist": "normal", "mean": 10, "std": 1, "low": 9, "high": 3}, "workload.input_len.normal"),
        ({"dist": "uniform", "low": 9, "high": 3}, "workload.input_len.uniform"),
        ({"dist": "zipf", "low": 1, "high": 3}, "workload.input_len.uniform.dist"),
        ({"dist": "normal", "mean": 10, "std": 1, "median": 3}, "workload.input_len.normal.median"),
        (0, "workload.input_len"),
        ("from_data", "workload.input_len"),
    ],
)
def test_length_errors_name_the_field(tiny_raw: dict[str, Any], value: Any, where: str) -> None:
    assert where in spec_error(tiny_raw, input_len=value)


# ---------------------------------------------------------------- spec of kinds, endpoint, arrival


def test_workload_defaults(tiny_raw: dict[str, Any]) -> None:
    spec = with_workload(tiny_raw)
    assert isinstance(spec, StudySpec)
    w = spec.workload
    assert (w.kind, w.input_len, w.output_len, w.endpoint) == ("synthetic", 128, 64, "completions")
    assert w.arrival == ClosedArrival()
    jsonl = with_workload(tiny_raw, kind="jsonl", path="x.jsonl")
    assert isinstance(jsonl, StudySpec) and jsonl.workload.input_len is None  # no cap unless given
    assert jsonl.workload.truncate is True


def test_arrival_forms(tiny_raw: dict[str, Any]) -> None:
    spec = with_workload(tiny_raw, arrival={"kind": "poisson", "rate": 2.5, "max_in_flight": 8})
    assert isinstance(spec, StudySpec)
    assert spec.workload.arrival == PoissonArrival(kind="poisson", rate=2.5, max_in_flight=8)
    spec = with_workload(tiny_raw, arrival={"kind": "poisson", "rate": 3})
    assert isinstance(spec, StudySpec) and spec.workload.arrival.max_in_flight is None  # type: ignore[union-attr]
    spec = with_workload(tiny_raw, arrival={})
    assert isinstance(spec, StudySpec) and spec.workload.arrival == ClosedArrival()


@pytest.mark.parametrize(
    ("workload", "needles"),
    [
        ({"arrival": {"kind": "poisson"}}, ["workload.arrival.poisson.rate"]),
        ({"arrival": {"kind": "poisson", "rate": 0}}, ["workload.arrival.poisson.rate"]),
        (
            {"arrival": {"kind": "poisson", "rate": 1, "max_in_flight": 0}},
            ["workload.arrival.poisson.max_in_flight"],
        ),
        ({"arrival": {"kind": "burst"}}, ["workload.arrival"]),
        ({"arrival": {"kind": "closed", "rate": 3}}, ["workload.arrival.closed.rate"]),
        ({"kind": "shared_prefix"}, ["workload", "prefix_len"]),
        ({"kind": "shared_prefix", "prefix_len": 0}, ["workload.prefix_len"]),
        ({"kind": "shared_prefix", "prefix_len": 8, "num_prefixes": 0}, ["workload.num_prefixes"]),
        ({"kind": "shared_prefix", "prefix_len": 8, "prefix_order": "lru"}, ["workload.prefix_order"]),
        ({"prefix_len": 8}, ["workload", "prefix_len", "shared_prefix"]),
        ({"path": "a.jsonl"}, ["workload", "path", "jsonl"]),
        ({"truncate": False}, ["workload", "truncate", "jsonl"]),
        ({"kind": "jsonl"}, ["workload", "path", "required"]),
        ({"kind": "jsonl", "path": "a", "input_len": {"low": 1, "high": 4}}, ["workload", "input_len"]),
        ({"output_len": "from_data"}, ["workload", "output_len", "from_data"]),
        ({"output_len": "from_file"}, ["workload.output_len"]),
        ({"endpoint": "responses"}, ["workload.endpoint"]),
        ({"kind": "random"}, ["workload.kind"]),
        ({"input_len": None}, ["workload", "input_len"]),
    ],
)
def test_workload_errors_name_the_field(tiny_raw: dict[str, Any], workload: dict, needles: list[str]) -> None:
    msg = spec_error(tiny_raw, **workload)
    for needle in needles:
        assert needle in msg, msg


def test_set_overrides_reach_the_workload(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    import yaml

    from nova_search.spec import load_spec

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_raw))
    spec = load_spec(
        path,
        [
            "workload.kind=shared_prefix",
            "workload.prefix_len=256",
            "workload.num_prefixes=4",
            "workload.arrival={kind: poisson, rate: 4}",
            "workload.output_len={dist: normal, mean: 64, std: 8}",
        ],
    )
    w = spec.workload
    assert (w.kind, w.prefix_len, w.num_prefixes, w.input_len) == ("shared_prefix", 256, 4, 96)
    assert isinstance(w.arrival, PoissonArrival) and w.arrival.rate == 4.0
    assert isinstance(w.output_len, NormalLen)


def test_spec_round_trips_through_its_dump(tiny_raw: dict[str, Any]) -> None:
    """The study stores the spec as a mapping and workers parse it again."""
    spec = with_workload(
        tiny_raw,
        kind="shared_prefix",
        prefix_len=16,
        input_len={"dist": "normal", "mean": 8, "std": 2},
        arrival={"kind": "poisson", "rate": 1.5},
    )
    assert isinstance(spec, StudySpec)
    assert parse_spec(spec.model_dump(mode="json")) == spec


# ---------------------------------------------------------------- shared prefix


def test_shared_prefix_structure() -> None:
    w = W(kind="shared_prefix", num_prefixes=3, prefix_len=20, input_len=5, output_len=4, seed=9)
    source = prompt_source(w, ModelSpec(path="/nonexistent", vocab_size=5000))
    assert isinstance(source, SharedPrefixSource)
    prefixes = source.prefixes
    assert len(prefixes) == 3 and len(set(prefixes)) == 3
    assert all(len(p) == 20 and min(p) >= 3 and max(p) < 4950 for p in prefixes)
    prompts = take(source, 30)
    used = [prefixes.index(p.token_ids[:20]) for p in prompts]
    assert all(len(p.token_ids) == 25 and p.output_len == 4 and p.messages == () for p in prompts)
    # round robin from a seeded start: 0 1 2 0 1 2 ... shifted
    assert used == [(used[0] + i) % 3 for i in range(30)]
    assert len({p.token_ids[20:] for p in prompts}) == 30  # every suffix its own


def test_shared_prefixes_are_the_same_at_every_level_the_rest_is_seeded() -> None:
    w = W(kind="shared_prefix", num_prefixes=4, prefix_len=8, input_len={"low": 2, "high": 6})
    model = ModelSpec(path="/nonexistent", vocab_size=1000)
    source = prompt_source(w, model)
    a = take(source, 40, seed=level_seed(0, 0))
    b = take(source, 40, seed=level_seed(0, 1))
    assert {p.token_ids[:8] for p in a} == {p.token_ids[:8] for p in b} == set(source.prefixes)
    assert a != b
    assert a == take(prompt_source(w, model), 40, seed=level_seed(0, 0))  # same seed, same prompts
    assert {len(p.token_ids) - 8 for p in a} == {2, 3, 4, 5, 6}
    other = prompt_source(W(**{**w.model_dump(), "seed": 1}), model)
    assert set(other.prefixes).isdisjoint(source.prefixes)  # workload.seed draws the prefixes


def test_shared_prefix_random_order() -> None:
    w = W(kind="shared_prefix", num_prefixes=5, prefix_len=4, input_len=4, prefix_order="random")
    source = prompt_source(w, ModelSpec(path="/nonexistent", vocab_size=1000))
    used = [source.prefixes.index(p.token_ids[:4]) for p in take(source, 500)]
    counts = np.bincount(used, minlength=5)
    assert counts.min() > 60  # ~100 each
    assert any(used[i + 1] != (used[i] + 1) % 5 for i in range(len(used) - 1))  # not round robin


# ---------------------------------------------------------------- chat text (tokenizer)


def test_chat_needs_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"workload\.endpoint") as e:
        prompt_source(W(endpoint="chat"), ModelSpec(path=str(tmp_path), vocab_size=1000))
    assert "tokenizer.json" in str(e.value) and "workload.tokenizer" in str(e.value)
    with pytest.raises(SpecError, match=r"workload\.tokenizer"):
        prompt_source(W(endpoint="chat", tokenizer=str(tmp_path / "nope")), ModelSpec(path="/x"))
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(SpecError, match=r"workload\.tokenizer: cannot load"):
        prompt_source(W(endpoint="chat"), ModelSpec(path=str(tmp_path)))


def test_chat_synthetic_text_has_exact_token_lengths(tiny: Path, tok: Tokenizer) -> None:
    w = W(endpoint="chat", input_len={"low": 1, "high": 300}, output_len=7)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    assert isinstance(source, SyntheticSource)
    prompts = take(source, 300)
    for p in prompts:
        (m,) = p.messages
        assert m.role == "user" and p.endpoint == "chat" and p.output_len == 7
        assert encode(tok, m.content) == list(p.token_ids)  # the content's own tokenization
        assert 1 <= len(p.token_ids) <= 300
    assert all(len(encode(tok, p.messages[0].content)) == len(p.token_ids) for p in prompts)
    assert len({len(p.token_ids) for p in prompts}) > 100
    assert take(source, 20, seed=4) == take(prompt_source(w, ModelSpec(path=str(tiny))), 20, seed=4)
    assert take(source, 5, seed=4) != take(source, 5, seed=5)


def test_chat_exact_lengths_for_fixed_sizes(tiny: Path, tok: Tokenizer) -> None:
    for n in (1, 2, 17, 512):
        prompts = take(prompt_source(W(endpoint="chat", input_len=n), ModelSpec(path=str(tiny))), 40)
        assert all(len(encode(tok, p.messages[0].content)) == n for p in prompts), n


def test_chat_shared_prefix_is_the_system_message(tiny: Path, tok: Tokenizer) -> None:
    w = W(kind="shared_prefix", endpoint="chat", num_prefixes=2, prefix_len=30, input_len=10)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    prompts = take(source, 10)
    systems = {p.messages[0].content for p in prompts}
    assert len(systems) == 2
    for p in prompts:
        system, user = p.messages
        assert (system.role, user.role) == ("system", "user")
        assert len(encode(tok, system.content)) == 30 and len(encode(tok, user.content)) == 10
        assert list(p.token_ids) == encode(tok, system.content) + encode(tok, user.content)


def test_tokenizer_option_takes_a_folder_or_the_file(tiny: Path) -> None:
    model = ModelSpec(path="/nonexistent", vocab_size=2048)
    for where in (tiny, tiny / "tokenizer.json"):
        source = prompt_source(W(endpoint="chat", input_len=5, tokenizer=str(where)), model)
        assert take(source, 1)[0].messages


# ---------------------------------------------------------------- conversation records


def test_openai_record_up_to_the_last_user_turn() -> None:
    rec = openai(
        ("system", "be brief"),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "what is 2+2?"),
        ("assistant", "4"),
        ("user", "   "),  # blank: not the last user turn
    )
    conv = parse_record(rec)
    assert conv is not None
    assert conv.messages == (
        Message("system", "be brief"),
        Message("user", "hi"),
        Message("assistant", "hello"),
        Message("user", "what is 2+2?"),
    )
    assert conv.answer == "4"
    conv = parse_record(openai(("user", "q1"), ("assistant", "a1"), ("user", "q2")))
    assert conv is not None and conv.messages[-1] == Message("user", "q2") and conv.answer is None


def test_openai_content_parts() -> None:
    rec = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]
    }
    conv = parse_record(rec)
    assert conv is not None and conv.messages == (Message("user", "ab"),)
    image = {"type": "image_url", "image_url": {"url": "x"}}
    rec = {"messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]}
    conv = parse_record(rec)
    assert conv is not None and conv.messages == (Message("user", "look"),)


def test_sharegpt_record_roles() -> None:
    rec = sharegpt(("system", "sys"), ("human", "q1"), ("gpt", "a1"), ("human", "q2"), ("gpt", "a2"))
    conv = parse_record(rec)
    assert conv is not None
    assert [m.role for m in conv.messages] == ["system", "user", "assistant", "user"]
    assert conv.messages[-1].content == "q2" and conv.answer == "a2"


@pytest.mark.parametrize(
    "record",
    [
        {"text": "plain"},
        [1, 2],
        openai(("assistant", "only an answer")),
        openai(("tool", "x"), ("user", "q")),
        {"messages": [{"role": "user"}]},
        {"messages": [{"role": "user", "content": 3}]},
        sharegpt(("gpt", "a")),
        sharegpt(("alien", "x"), ("human", "q")),
        {"conversations": [{"from": "human", "value": None}]},
        openai(("user", "")),
    ],
)
def test_unusable_records(record: Any) -> None:
    assert parse_record(record) is None


def test_read_records_jsonl_and_json_array(tmp_path: Path) -> None:
    recs = [openai(("user", "a")), sharegpt(("human", "b"))]
    lines = tmp_path / "a.jsonl"
    lines.write_text(json.dumps(recs[0]) + "\n\n" + json.dumps(recs[1]) + "\n")
    assert read_records(lines) == recs
    array = tmp_path / "sharegpt.json"
    array.write_text(json.dumps(recs, indent=2))
    assert read_records(array) == recs


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "workload.path: cannot read"),
        (b"\xff\xfe\x00bad", "workload.path: .* is not UTF-8"),
        (b'{"messages": []}\n{oops\n', "workload.path: .* line 2 is not valid JSON"),
        (b"[1, 2", "workload.path: .* is not valid JSON"),
    ],
)
def test_read_records_errors_name_the_path(tmp_path: Path, content: bytes | None, match: str) -> None:
    path = tmp_path / "data.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SpecError, match=match):
        read_records(path)


def test_a_folder_is_not_a_file(tmp_path: Path, tiny: Path) -> None:
    with pytest.raises(SpecError, match=r"workload\.path: .* is a directory, not a regular file"):
        prompt_source(W(kind="jsonl", path=str(tmp_path)), ModelSpec(path=str(tiny)))


# ---------------------------------------------------------------- jsonl prompts (tokenized)


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software.",
    "a",
    "GNU GENERAL PUBLIC LICENSE Version 3, 29 June 2007. " * 12,
]


def mixed_file(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            openai(("system", "You are terse."), ("user", TEXTS[0]), ("assistant", TEXTS[1])),
            sharegpt(("human", TEXTS[1]), ("gpt", TEXTS[0]), ("human", TEXTS[2]), ("gpt", TEXTS[3])),
            openai(("user", TEXTS[3])),  # no answer
            {"not": "a conversation"},
            sharegpt(("human", TEXTS[3]), ("gpt", TEXTS[2])),
        ],
    )


def test_jsonl_completions_prompts_are_the_tokenized_conversation(
    tmp_path: Path, tiny: Path, tok: Tokenizer
) -> None:
    w = W(kind="jsonl", path=str(mixed_file(tmp_path)), output_len=32)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    assert isinstance(source, JsonlSource)
    assert (source.stats.records, source.stats.usable, source.stats.unparsed) == (5, 4, 1)
    expected = {
        tuple(tok.encode(t).ids)
        for t in (
            "You are terse.\n\n" + TEXTS[0],
            TEXTS[1] + "\n\n" + TEXTS[0] + "\n\n" + TEXTS[2],
            TEXTS[3],
            TEXTS[3],
        )
    }
    prompts = take(source, 4)
    assert {p.token_ids for p in prompts} == expected  # one epoch: every usable record once
    assert all(p.output_len == 32 and p.messages == () for p in prompts)


def test_jsonl_output_len_from_data(tmp_path: Path, tiny: Path, tok: Tokenizer) -> None:
    w = W(kind="jsonl", path=str(mixed_file(tmp_path)), output_len="from_data")
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    assert isinstance(source, JsonlSource)
    assert source.stats.usable == 3 and source.stats.no_answer == 1
    got = {(len(p.token_ids), p.output_len) for p in take(source, 3)}
    assert got == {
        (len(tok.encode("You are terse.\n\n" + TEXTS[0]).ids), len(encode(tok, TEXTS[1]))),
        (len(tok.encode(TEXTS[1] + "\n\n" + TEXTS[0] + "\n\n" + TEXTS[2]).ids), len(encode(tok, TEXTS[3]))),
        (len(encode(tok, TEXTS[3])), len(encode(tok, TEXTS[2]))),
    }


def test_jsonl_output_len_distribution(tmp_path: Path, tiny: Path) -> None:
    w = W(kind="jsonl", path=str(mixed_file(tmp_path)), output_len={"dist": "normal", "mean": 40, "std": 10})
    outs = [p.output_len for p in take(prompt_source(w, ModelSpec(path=str(tiny))), 400)]
    assert np.mean(outs) == pytest.approx(40, abs=2) and len(set(outs)) > 10


def test_jsonl_truncate_cuts_to_the_head(tmp_path: Path, tiny: Path, tok: Tokenizer) -> None:
    path = mixed_file(tmp_path)
    full = {
        tuple(p.token_ids)
        for p in take(prompt_source(W(kind="jsonl", path=str(path)), ModelSpec(path=str(tiny))), 4)
    }
    limit = 20
    w = W(kind="jsonl", path=str(path), input_len=limit, truncate=True)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    assert isinstance(source, JsonlSource)
    longer = [f for f in full if len(f) > limit]
    assert source.stats.usable == 4 and source.stats.truncated == len(longer) + 1  # TEXTS[3] twice
    got = {p.token_ids for p in take(source, 4)}
    assert all(len(g) <= limit for g in got)
    assert got == {f[:limit] for f in full}


def test_jsonl_without_truncate_filters_the_longer(tmp_path: Path, tiny: Path, tok: Tokenizer) -> None:
    path = mixed_file(tmp_path)
    limit = len(tok.encode("You are terse.\n\n" + TEXTS[0]).ids)  # the shortest prompt of the file
    w = W(kind="jsonl", path=str(path), input_len=limit, truncate=False)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    assert isinstance(source, JsonlSource)
    assert (source.stats.usable, source.stats.too_long, source.stats.truncated) == (1, 3, 0)
    prompts = take(source, 5)
    assert {len(p.token_ids) for p in prompts} == {limit}
    with pytest.raises(SpecError, match=r"workload\.path: .* no usable prompt .* 4 longer than input_len 1 "):
        prompt_source(W(kind="jsonl", path=str(path), input_len=1, truncate=False), ModelSpec(path=str(tiny)))


def test_jsonl_chat_prompts_are_messages(tmp_path: Path, tiny: Path, tok: Tokenizer) -> None:
    w = W(kind="jsonl", path=str(mixed_file(tmp_path)), endpoint="chat", output_len="from_data")
    prompts = take(prompt_source(w, ModelSpec(path=str(tiny))), 3)
    by_first = {p.messages[0].content: p for p in prompts}
    p = by_first["You are terse."]
    assert p.messages == (Message("system", "You are terse."), Message("user", TEXTS[0]))
    assert list(p.token_ids) == encode(tok, "You are terse.") + encode(tok, TEXTS[0])
    assert p.output_len == len(encode(tok, TEXTS[1]))
    q = by_first[TEXTS[1]]
    assert [m.role for m in q.messages] == ["user", "assistant", "user"]
    assert all(pr.endpoint == "chat" for pr in prompts)


def test_jsonl_chat_truncation_cuts_the_messages(tmp_path: Path, tiny: Path, tok: Tokenizer) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [openai(("system", TEXTS[0]), ("user", TEXTS[1]), ("assistant", "x"), ("user", TEXTS[2]))],
    )
    head = len(encode(tok, TEXTS[0]))
    limit = head + 5
    (p,) = take(
        prompt_source(
            W(kind="jsonl", path=str(path), endpoint="chat", input_len=limit), ModelSpec(path=str(tiny))
        ),
        1,
    )
    assert len(p.token_ids) == limit
    system, user = p.messages  # the later turns dropped
    assert system == Message("system", TEXTS[0])
    assert user.role == "user" and TEXTS[1].startswith(user.content) and len(encode(tok, user.content)) == 5


def test_jsonl_shuffle_is_seeded_and_covers_every_record(tmp_path: Path, tiny: Path) -> None:
    recs = [openai(("user", f"question number {i} about {'x' * i}")) for i in range(30)]
    w = W(kind="jsonl", path=str(write_jsonl(tmp_path / "q.jsonl", recs)), output_len=8)
    source = prompt_source(w, ModelSpec(path=str(tiny)))
    a = take(source, 60, seed=1)
    assert a == take(prompt_source(w, ModelSpec(path=str(tiny))), 60, seed=1)
    assert a[:30] != take(source, 30, seed=2)
    assert len({p.token_ids for p in a[:30]}) == 30 and len({p.token_ids for p in a[30:]}) == 30
    assert [p.token_ids for p in a[:30]] != [p.token_ids for p in a[30:]]  # reshuffled for the second pass
    natural = [
        tuple(Tokenizer.from_file(str(tiny / "tokenizer.json")).encode(r["messages"][0]["content"]).ids)
        for r in recs
    ]
    assert [p.token_ids for p in a[:30]] != natural  # shuffled, not file order


def test_jsonl_errors_name_the_fields(tmp_path: Path, tiny: Path) -> None:
    model = ModelSpec(path=str(tiny))
    with pytest.raises(SpecError, match=r"workload\.path: cannot read .*missing\.jsonl"):
        prompt_source(W(kind="jsonl", path=str(tmp_path / "missing.jsonl")), model)
    junk = write_jsonl(tmp_path / "junk.jsonl", [{"a": 1}, sharegpt(("gpt", "only answers"))])
    with pytest.raises(
        SpecError, match=r"workload\.path: .*junk\.jsonl gives no usable prompt \(2 records: 2 neither"
    ):
        prompt_source(W(kind="jsonl", path=str(junk)), model)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(SpecError, match=r"workload\.path: .* no usable prompt \(0 records"):
        prompt_source(W(kind="jsonl", path=str(empty)), model)
    no_answers = write_jsonl(tmp_path / "q.jsonl", [openai(("user", "q"))])
    with pytest.raises(SpecError, match=r"workload\.path: .* 1 without a reference answer"):
        prompt_source(W(kind="jsonl", path=str(no_answers), output_len="from_data"), model)
    with pytest.raises(SpecError, match=r"workload\.kind jsonl needs a tokenizer"):
        prompt_source(W(kind="jsonl", path=str(no_answers)), ModelSpec(path=str(tmp_path)))
