"""One request's input (``Prompt``), the protocol every prompt source keeps (``PromptSource``), and
the token ids a random prompt is drawn from (``id_range``). ``loadgen.prompts`` makes the sources
of the synthetic, shared-prefix and JSONL workloads, ``loadgen.replay`` a trace's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's input. ``token_ids`` is the prompt as ids (for chat: the messages' contents,
    tokenized one by one and concatenated, without the template); ``messages`` set means the prompt
    goes to /v1/chat/completions as text."""

    token_ids: tuple[int, ...]
    output_len: int
    messages: tuple[Message, ...] = ()
    #: the prompt as text for /v1/completions (``prompt_format: text``); None: the ids are sent
    text: str | None = None

    @property
    def endpoint(self) -> str:
        return "chat" if self.messages else "completions"


class PromptSource(Protocol):
    def prompts(self, seed: int) -> Iterator[Prompt]:
        """An endless, seeded stream of prompts. The same seed gives the same prompts."""
        ...


def id_range(vocab: int) -> tuple[int, int]:
    """The ids random prompts are drawn from, [low, high): the lowest ids and the top of the
    vocabulary are where models keep their special tokens."""
    return 3, max(4, int(vocab * 0.99))
