"""Reading a spec: bounded YAML, ``--set`` overrides, one validation, errors that name the field.

The YAML reader is bounded, because a spec may come from anyone:

- the file: a regular file (a FIFO, a device, a directory or a socket is refused before it is opened,
  and it is opened without blocking), of at most ``MAX_SPEC_BYTES``, UTF-8 (an invalid byte is named
  with its offset);
- no anchors or aliases (``&a`` / ``*a``: a few hundred bytes of nested aliases expand to gigabytes,
  and a spec has no need for them), and no merge keys (``<<:``, which overwrite keys silently);
- no key twice in one mapping (YAML says a key is unique; PyYAML keeps the last one silently, so a
  second ``budget:`` would win unseen): the key, its line and its first line are named;
- at most ``MAX_DEPTH`` levels of nesting (a spec needs about six; PyYAML composes recursively, so
  20,000 levels would end in a RecursionError);
- an integer of at most ``MAX_INT_CHARS`` characters (Python refuses to convert more than 4,300
  digits, with a ValueError): the field is named.

``--set`` values are read by the same reader. Every refusal is a ``SpecError`` (exit 2), never a
traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nova_search.errors import SpecError
from nova_search.files import UnreadableFile, read_bounded, special_file
from nova_search.spec.study import StudySpec

#: the largest spec file read
MAX_SPEC_BYTES = 1 << 20
#: the deepest nesting of mappings and lists a spec may have (a spec uses about six levels)
MAX_DEPTH = 64
#: the longest integer scalar, sign and underscores included (2**64 has 20 digits)
MAX_INT_CHARS = 40

_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class _Refused(yaml.YAMLError):
    """YAML that is valid but not accepted in a spec."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors and aliases before anything is expanded, nesting deeper
    than MAX_DEPTH while it composes; ``check`` then refuses repeated keys, merge keys and overlong
    integers on the composed nodes, naming the field."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._path: list[str] = []  # the keys (and list indexes) above the node being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        mark = f"line {event.start_mark.line + 1}"
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"YAML aliases are not accepted in a spec (*{event.anchor}, {mark}): write it out")
        if getattr(event, "anchor", None):
            raise _Refused(f"YAML anchors are not accepted in a spec (&{event.anchor}, {mark}): write it out")
        if len(self._path) >= MAX_DEPTH:
            where = ".".join(p for p in self._path[:4] if p)
            raise _Refused(
                f"{where}...: nested deeper than {MAX_DEPTH} levels ({mark}); a spec needs a handful"
            )
        self._path.append(
            str(index.value) if isinstance(index, yaml.ScalarNode) else "" if index is None else str(index)
        )
        try:
            return super().compose_node(parent, index)
        finally:
            self._path.pop()


def _check_nodes(node: yaml.Node, where: str) -> None:
    """Refuse, naming the field and its line: a key given twice in a mapping, a merge key, an integer
    longer than MAX_INT_CHARS. Iterative: the depth is bounded already, but a walk costs no stack."""
    todo: list[tuple[yaml.Node, str]] = [(node, where)]
    while todo:
        n, path = todo.pop()
        line = n.start_mark.line + 1
        if isinstance(n, yaml.ScalarNode):
            if n.tag == _INT_TAG and len(n.value) > MAX_INT_CHARS:
                raise _Refused(
                    f"{path + ': ' if path else ''}an integer of {len(n.value)} characters (line {line}); "
                    f"a spec's numbers have at most {MAX_INT_CHARS}"
                )
            if n.tag == _TIMESTAMP_TAG:
                try:
                    yaml.SafeLoader.construct_yaml_timestamp(_BoundedLoader(""), n)
                except (ValueError, OverflowError) as e:  # 2024-13-45
                    raise _Refused(
                        f"{path + ': ' if path else ''}{n.value!r} is not a date (line {line}): {e}"
                    ) from None
        elif isinstance(n, yaml.SequenceNode):
            todo.extend((item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(n.value))
        elif isinstance(n, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key, value in n.value:
                key_line = key.start_mark.line + 1
                if key.tag == _MERGE_TAG:
                    raise _Refused(
                        f"{path or 'the top level'}: YAML merge keys (<<:, line {key_line}) are not accepted "
                        "in a spec: write the keys out"
                    )
                name = key.value if isinstance(key, yaml.ScalarNode) else f"(a {key.id} key)"
                field = f"{path}.{name}" if path else str(name)
                if isinstance(key, yaml.ScalarNode):
                    todo.append((key, field))
                    seen = (key.tag, key.value)
                    if seen in first:
                        raise _Refused(
                            f"{field}: given twice (line {first[seen]} and line {key_line}); "
                            "YAML keys are unique: keep one"
                        )
                    first[seen] = key_line
                todo.append((value, field))


def read_yaml(text: str, what: str) -> Any:
    """``text`` as YAML, with the bounded reader. SpecError naming ``what`` (and the field) when it is
    not YAML or not accepted."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses NUL and other unprintable characters
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, "")
        return loader.construct_document(node)
    except _Refused as e:
        raise SpecError(f"{what}: {e}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{what}: not valid YAML: {e}") from None
    except (ValueError, OverflowError, RecursionError) as e:  # a date like 2024-13-45, say
        raise SpecError(f"{what}: a value YAML cannot read: {e}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_spec_text(path: Path) -> str:
    """The spec file's text: a regular file of at most MAX_SPEC_BYTES, UTF-8. SpecError naming the
    file otherwise. Read with ``files.read_bounded``: a FIFO or a device is refused before it is opened
    and the file is opened with O_NONBLOCK, so a file swapped for a FIFO after the check never blocks."""
    try:
        data = read_bounded(path, MAX_SPEC_BYTES)
    except UnreadableFile as e:
        if e.kind is None:  # over the bound
            raise SpecError(
                f"{path}: a spec is at most {MAX_SPEC_BYTES // 1024} KiB (this file is larger)"
            ) from None
        raise SpecError(f"{path}: {e.kind}, not a regular file; give the spec file itself") from None
    except OSError as e:
        raise SpecError(f"cannot read spec {path}: {e.strerror or e}") from None
    except ValueError:  # an embedded NUL byte in the path
        raise SpecError(f"cannot read spec {path!r}: the path holds a NUL byte") from None
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
        if not sep or not key.strip() or any(not part.strip() for part in key.strip().split(".")):
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
    """The spec file a user gives (``create``, ``run``, ``validate``), with its ``--set`` overrides,
    validated, and its local files checked (``local_file_problems``)."""
    p = Path(path)
    raw = read_yaml(read_spec_text(p), str(p))
    if not isinstance(raw, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields")
    spec = parse_spec(apply_overrides(raw, overrides or []), str(p))
    problems = local_file_problems(spec)
    if problems:
        raise SpecError(f"{p}: " + "; ".join(problems))
    return spec


def local_file_problems(spec: StudySpec) -> list[str]:
    """The files a trial reads that are here and could never be read as files, each naming its field:
    a FIFO, a device or a socket (reading one blocks, or never ends), or a directory where a file is
    read. Checked where a user hands a spec in (``load_spec``), before anything is stored, so that the
    study is refused at ``create`` rather than by each worker (which checks again: ``create`` may run
    on another host). A path that is not here is left alone: it may be on the workers' hosts."""
    problems: list[str] = []

    def check(field: str, path: str | None, *, folder_ok: bool, inside: str | None = None) -> None:
        if path is None:
            return
        kind = special_file(path, folder_ok=folder_ok)
        if kind is None and inside is not None and Path(path).is_dir():
            path, kind = str(Path(path) / inside), special_file(Path(path) / inside)
        if kind is not None:
            problems.append(f"{field}: {path} is {kind}, not a regular file")

    check("workload.path", spec.workload.path, folder_ok=False)
    check("workload.tokenizer", spec.workload.tokenizer, folder_ok=True, inside="tokenizer.json")
    check("model.path", spec.model.path, folder_ok=True, inside="config.json")
    for method, drafter in spec.space.speculative.drafters.items():
        check(f"space.speculative.drafters.{method}", drafter, folder_ok=True, inside="config.json")
    kind = special_file(spec.artifacts_dir, folder_ok=True)
    if kind is not None:  # every trial writes its server log there
        problems.append(f"artifacts_dir: {spec.artifacts_dir} is {kind}, not a folder")
    return problems


def format_validation_error(e: ValidationError, source: str) -> str:
    lines: list[str] = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if not loc:  # the spec's own checks: each message starts with the field it names
            lines.append(f"  {msg}")
            continue
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; docs/spec-reference.md lists every field)"
        given = err.get("input")
        shown = (
            ""
            if err["type"] in ("missing", "extra_forbidden") or isinstance(given, dict)
            else f" (got {_short_repr(given)})"
        )
        lines.append(f"  {loc}: {msg}{shown}")
    count = sum(1 for line in "\n".join(lines).splitlines() if line.startswith("  ") and line[2] != " ")
    return "\n".join([f"{source}: {count} invalid field(s)", *lines])


def _short_repr(value: object, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 200 KB value is not echoed back whole)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit conversion limit
        return "an integer too long to print"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
