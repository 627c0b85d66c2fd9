"""Secrets recognised by where they are, not only by name, and text made safe for one line.

- ``secret_name(name)``: an environment variable or URL query parameter whose name says it holds a
  secret (``HF_TOKEN``, ``DB_PASS``, ``PGPASSWORD``, ``sslpassword``, ``passfile``, ``PROXY_AUTH``...).
- ``url_secrets(text)``: the literal secrets inside a value: the userinfo of any URL in it
  (``http://user:pw@proxy``, ``https://token@host``) and secret query parameters
  (``...?password=...``). ``${NAME}`` references are not literal secrets: they are read from the
  worker's environment at launch.
- ``secret_flag(arg)``: a vLLM flag that carries a secret (``--hf-token``, ``--api-key``), in any
  spelling vLLM accepts: ``_`` for ``-``, ``--flag=value``, and argparse's abbreviations
  (``--api-ke``).
- ``mask_text(text, secrets)``: every secret in ``text`` replaced by ``***``.
- ``one_line(text)``: control characters (newlines, terminal escapes and bidirectional overrides
  included) escaped, so a value can go into a comment, a header, a log line or a terminal without
  starting a new line or steering the terminal; ``terminal_safe(text)``: the same, lines kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: names that say "a secret": substrings, and whole words (between ``_``, ``-``, ``.``, digits or the ends)
SECRET_NAME = re.compile(
    r"TOKEN(?!IZER)|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|SESSION_?KEY|(?:^|[^A-Z])(?:PASS|PASSFILE|PWD|AUTH|AUTHORIZATION|COOKIE|SIGNATURE|SAS)(?:$|[^A-Z])",
    re.IGNORECASE,
)
#: ``${NAME}`` or ``${NAME:-default}``: a value read from the worker's environment at launch
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: a URL's userinfo: ``scheme://USERINFO@``. A match starts only where a run of scheme characters
#: starts (the lookbehind), the scheme being its part from the first letter: tried at every letter of
#: a long run, the search took quadratic time (a 32 KiB value: a second and a half; issue 40)
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://([^/?#@\s]+)@")
#: a query or form parameter: ``?name=value`` / ``&name=value`` / ``;name=value``
_PARAM = re.compile(r"[?&;]([A-Za-z0-9_.-]+)=([^&;#\s]*)")
#: ``NAME=value``, as ``env`` and ``docker run -e`` take it
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
#: vLLM flags whose value is a secret (normalised: ``--`` and dashes)
SECRET_FLAGS = ("--api-key", "--hf-token")
#: control characters: C0 (ESC among them: a terminal's escape sequences, OSC's included), DEL, C1, the
#: line and paragraph separators YAML takes for line breaks, and the bidirectional marks, embeddings,
#: overrides and isolates (a terminal or an editor shows text in another order than it is: "Trojan
#: source")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _literal(value: str) -> str:
    """``value`` without its ``${NAME}`` references (a reference's default is literal: it stays)."""
    return REFERENCE.sub(lambda m: m.group(2) or "", value)


def url_secrets(value: str) -> list[str]:
    """The literal secrets of ``value``: URL passwords (or a userinfo without one: a token as the user
    name) and the values of secret query parameters; ``${NAME}`` references left out."""
    out = []
    for m in _USERINFO.finditer(value):
        user, sep, password = m.group(1).partition(":")
        secret = _literal(password if sep else user)
        if secret:
            out.append(password if sep else user)
    for m in _PARAM.finditer(value):
        if secret_name(m.group(1)) and _literal(m.group(2)):
            out.append(m.group(2))
    return out


def word_secrets(word: str) -> list[str]:
    """The literal secrets of one command word: its URL secrets, and the value of a ``NAME=value``
    whose name says it holds a secret (``docker run -e HF_TOKEN=...``)."""
    out = url_secrets(word)
    m = _ASSIGNMENT.fullmatch(word)
    if m and secret_name(m.group(1)) and _literal(m.group(2)):
        out.append(m.group(2))
    return out


def normalise_flag(arg: str) -> str:
    """A vLLM flag as vLLM reads its name: ``--api_key=x`` -> ``--api-key`` (``_`` is ``-`` in the name,
    up to the first ``.``, as vLLM's FlexibleArgumentParser reads it); not a ``--`` flag: unchanged."""
    if not arg.startswith("--"):
        return arg
    name = arg.split("=", 1)[0].split(".", 1)[0]
    return "--" + name[2:].replace("_", "-")


def matches_flag(arg: str, flag: str) -> bool:
    """``arg`` sets ``flag`` as vLLM reads it: any spelling, ``=value``, or an abbreviation (argparse
    takes an unambiguous prefix of a flag for the flag: ``--api-ke`` is ``--api-key``)."""
    name = normalise_flag(arg)
    return name.startswith("--") and len(name) > 3 and flag.startswith(name)


def secret_flag(arg: str) -> str | None:
    """The secret flag ``arg`` sets (``SECRET_FLAGS``), or None."""
    return next((f for f in SECRET_FLAGS if matches_flag(arg, f)), None)


def argv_secrets(argv: Iterable[str]) -> list[str]:
    """The literal secrets of an argv: the values of secret flags (``--flag V`` or ``--flag=V``; a bare
    ``--hf-token``, vLLM's "use the stored login", holds none) and URL secrets in any argument."""
    args = list(argv)
    out = []
    for i, a in enumerate(args):
        out += word_secrets(a)
        if secret_flag(a) is None:
            continue
        if "=" in a:
            out.append(a.split("=", 1)[1])
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append(args[i + 1])
    return [s for s in out if s]


def mask_urls(text: str) -> str:
    """``text`` with the literal secrets of its URLs (``url_secrets``) replaced by ``***`` where they
    stand: a URL's password (or a user name with no password), a secret query parameter's value."""

    def userinfo(m: re.Match[str]) -> str:
        user, sep, password = m.group(1).partition(":")
        if sep and _literal(password):
            return m.group(0).replace(m.group(1), f"{user}:***", 1)
        if not sep and _literal(user):
            return m.group(0).replace(m.group(1), "***", 1)
        return m.group(0)

    def param(m: re.Match[str]) -> str:
        if secret_name(m.group(1)) and _literal(m.group(2)):
            return m.group(0)[: -len(m.group(2))] + "***"
        return m.group(0)

    return _PARAM.sub(param, _USERINFO.sub(userinfo, text))


def mask_argv(argv: Iterable[str]) -> list[str]:
    """``argv`` with every literal secret (``argv_secrets``) replaced by ``***`` where it stands: the
    value of a secret flag, a URL's password or secret query parameter."""
    args = list(argv)
    out = []
    for i, a in enumerate(args):
        before = args[i - 1] if i else ""
        if secret_flag(a) is not None and "=" in a:
            a = a.split("=", 1)[0] + "=***"
        elif secret_flag(before) is not None and "=" not in before and not a.startswith("-"):
            a = "***"
        m = _ASSIGNMENT.fullmatch(a)
        if m and secret_name(m.group(1)) and _literal(m.group(2)):
            a = f"{m.group(1)}=***"
        out.append(mask_urls(a))
    return out


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (the longest first) replaced by ``***``."""
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def one_line(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``, ``\\u2028``): one line, whatever
    it held."""

    def escape(m: re.Match[str]) -> str:
        c = m.group(0)
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
            f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
        )

    return CONTROL.sub(escape, text)


def terminal_safe(text: str) -> str:
    """``text`` with every control character escaped but its line breaks and tabs: lines as written,
    and nothing a terminal would act on (an escape or OSC sequence, a bidirectional override). For
    text nova did not write itself (an engine's message, a stored argv, a name) on its way to a
    terminal."""
    return "\n".join("\t".join(one_line(part) for part in line.split("\t")) for line in text.split("\n"))


def control_character(text: str) -> str | None:
    """The first control character of ``text``, escaped (``\\n``), or None."""
    m = CONTROL.search(text)
    return one_line(m.group(0)) if m else None
