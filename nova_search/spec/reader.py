"""Reading a spec: bounded YAML, ``--set`` overrides, one validation, errors that name the field.

The YAML reader is bounded, because a spec may come from anyone: a file of at most ``MAX_SPEC_BYTES``,
UTF-8 (an invalid byte is named with its offset), and no anchors or aliases (``&a`` / ``*a``: a few
hundred bytes of nested aliases expand to gigabytes, and a spec has no need for them). ``--set``
values are read by the same reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nova_search.errors import SpecError
from nova_search.spec.study import StudySpec

#: the largest spec file read
MAX_SPEC_BYTES = 1 << 20


class _Refused(yaml.YAMLError):
    """YAML that is valid but not accepted in a spec."""


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors and aliases before anything is expanded."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        mark = f"line {event.start_mark.line + 1}"
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"YAML aliases are not accepted in a spec (*{event.anchor}, {mark}): write it out")
        if getattr(event, "anchor", None):
            raise _Refused(f"YAML anchors are not accepted in a spec (&{event.anchor}, {mark}): write it out")
        return super().compose_node(parent, index)


def read_yaml(text: str, what: str) -> Any:
    """``text`` as YAML, with the bounded reader. SpecError naming ``what`` when it is not YAML."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except _Refused as e:
        raise SpecError(f"{what}: {e}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{what}: not valid YAML: {e}") from None


def read_spec_text(path: Path) -> str:
    """The spec file's text: at most MAX_SPEC_BYTES, UTF-8. SpecError naming the file otherwise."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except OSError as e:
        raise SpecError(f"cannot read spec {path}: {e.strerror or e}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: a spec is at most {MAX_SPEC_BYTES // 1024} KiB (this file is larger)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); save it as UTF-8"
        ) from None


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides to a raw spec mapping. Values are read as YAML."""
    out = _deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--set {item!r}: write it as dotted.key=value, e.g. sweep.concurrency=[1,8]")
        try:
            value = read_yaml(text, f"--set {key}") if text.strip() else ""
        except SpecError as e:
            raise SpecError(f"--set {key}: {str(e).removeprefix(f'--set {key}: ')}") from None
        node: Any = out
        parts = key.strip().split(".")
        for depth, part in enumerate(parts[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = {}
                node[part] = nxt
            elif not isinstance(nxt, dict):
                where = ".".join(parts[: depth + 1])
                raise SpecError(f"--set {key}: {where} is not a mapping")
            node = nxt
        node[parts[-1]] = value
    return out


def _deepcopy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _deepcopy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deepcopy(x) for x in v]
    return v


def redacted_spec(spec: StudySpec) -> dict[str, Any]:
    """The spec as a study stores it: every field, with the storage URL's password and secret query
    parameters masked (workers take the storage URL from ``--storage`` / NOVA_STORAGE, never from a
    stored spec). Validation refuses literal secrets in ``engine.env`` and ``engine.extra_args``; any
    that a future field lets through is masked here too (``redact``)."""
    from nova_search import redact
    from nova_search.db import mask

    raw = spec.model_dump(mode="json")
    if raw.get("storage"):
        raw["storage"] = mask(raw["storage"])
    engine = raw.get("engine") or {}
    if engine.get("extra_args"):
        engine["extra_args"] = redact.mask_argv(engine["extra_args"])
    for key, value in (engine.get("env") or {}).items():
        engine["env"][key] = redact.mask_urls(value)
    return raw


def parse_spec(raw: Any, source: str = "spec") -> StudySpec:
    """Validate a raw mapping; every problem is reported with its field path."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: the top level must be a mapping of fields")
    try:
        return StudySpec.model_validate(raw)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, source)) from None


def load_spec(path: str | Path, overrides: list[str] | None = None) -> StudySpec:
    p = Path(path)
    raw = read_yaml(read_spec_text(p), str(p))
    if not isinstance(raw, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields")
    return parse_spec(apply_overrides(raw, overrides or []), str(p))


def format_validation_error(e: ValidationError, source: str) -> str:
    lines = [f"{source}: {e.error_count()} invalid field(s)"]
    for err in e.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; docs/spec-reference.md lists every field)"
        given = err.get("input")
        shown = (
            ""
            if err["type"] in ("missing", "extra_forbidden") or isinstance(given, dict)
            else (f" (got {given!r})")
        )
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)
