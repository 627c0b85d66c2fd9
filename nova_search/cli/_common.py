"""What every command shares: the typer app, the consoles, the common options, and the app's command
group, ``NovaGroup``: the one place that turns a ``NovaError`` raised anywhere in a command into a
message and its exit code (the error type's ``exit_code``, one of ``errors.ExitCode``: the table of
docs/commands.md#exit-codes), the order ``--help`` lists the commands in, and ``--version``. Commands
raise; they never print an error and exit themselves."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer
from rich.markup import escape
from typer.core import TyperGroup

from nova_search.cli._console import make_console
from nova_search.errors import NovaError, SpecError
from nova_search.spec import StudySpec

# one factory for both (``_console``): off a terminal, nothing is wrapped or cut
console = make_console()
err_console = make_console(stderr=True)

#: ``--help`` lists the commands as a user meets them: set a study up, run it, watch it, read its
#: results, deploy the answer, then the tools (a server measured by hand, the schema, local models)
COMMAND_ORDER = (
    "validate",
    "create",
    "run",
    "worker",
    "node",
    "status",
    "dashboard",
    "notes",
    "best",
    "policy",
    "report",
    "dump",
    "export",
    "bench",
    "db",
    "tiny-model",
    "trained-model",
)


def fail(e: NovaError) -> NoReturn:
    # the message is text, not markup: "[vllm, serve]" would vanish and "[/x]" raise MarkupError; and it
    # may quote stored or engine-reported text: nothing in it steers the terminal (redact.terminal_safe)
    from nova_search.redact import terminal_safe

    shown = escape(terminal_safe(str(e)))
    err_console.print(f"[red]error:[/] {shown}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(int(e.exit_code))


class NovaGroup(TyperGroup):
    """The app's group. Every command (``db``'s too) runs inside ``invoke``, so a ``NovaError`` from any
    of them, or from parsing their options, ends as one plain message on stderr and its exit code, never
    a traceback. A command that is not in ``COMMAND_ORDER`` is still listed, last."""

    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except NovaError as e:
            fail(e)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        names = super().list_commands(ctx)  # registration order, which follows the modules' imports
        return sorted(names, key=lambda name: rank.get(name, len(rank)))


app = typer.Typer(
    cls=NovaGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings are wrapped prose: a single newline is not a line break
    help="nova-search: find the best vLLM serving configuration with Optuna.",
)

#: the libraries whose versions decide what a study stores and how it is read, shown by --version
VERSIONED = ("optuna", "optuna-dashboard", "sqlalchemy", "pydantic")


def version_lines() -> list[str]:
    """``nova-search X``, then the version of each library in ``VERSIONED`` (``not installed`` when
    absent). vLLM is not asked: it lives in the engine's own interpreter, and every trial records the
    version its server reported (``dump``: ``engine_version``; the deploy answer: ``vllm_version``)."""
    from importlib.metadata import PackageNotFoundError, version

    from nova_search import __version__

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    py = sys.version_info
    return [f"nova-search {__version__}", *(f"{name} {of(name)}" for name in VERSIONED)] + [
        f"python {py.major}.{py.minor}.{py.micro}"
    ]


def _print_version(value: bool) -> None:
    if value:
        emit("\n".join(version_lines()))
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            expose_value=True,
            callback=_print_version,
            help="Print nova-search's version and its libraries' (optuna, ...), then exit.",
        ),
    ] = False,
) -> None:
    """nova-search: find the best vLLM serving configuration with Optuna."""


StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        envvar="NOVA_STORAGE",
        help="SQLAlchemy URL of the study storage. Default: the spec's storage, else sqlite:///nova.db.",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a spec field before validation: dotted.key=value (YAML value). Repeatable."
    ),
]
StudyNameOpt = Annotated[
    str | None, typer.Option("--study-name", help="Study name. Default: the spec's name.")
]
StudyArg = Annotated[str, typer.Argument(metavar="STUDY", help="The study name (staged: its own name).")]


def storage_url(flag: str | None, spec: StudySpec | None) -> str:
    """The storage URL: ``--storage``, else NOVA_STORAGE, else the spec's, else sqlite:///nova.db.

    Refused (exit 2), before anything is opened: an empty ``--storage``, a NOVA_STORAGE that is set but
    empty (a k8s secret that is missing renders that way: falling back to a local file would run the
    study where nobody looks for it), and an in-memory SQLite database (the study would be lost when the
    command exits)."""
    import os

    if flag is not None and not flag.strip():
        if os.environ.get("NOVA_STORAGE") == flag:  # click passes on a blank (not an empty) variable
            raise SpecError(_EMPTY_ENV)
        raise SpecError(
            "--storage is empty: give a SQLAlchemy URL (sqlite:///nova.db, postgresql+psycopg://...)"
        )
    if flag is None and "NOVA_STORAGE" in os.environ and not os.environ["NOVA_STORAGE"].strip():
        raise SpecError(_EMPTY_ENV)
    url = flag or (spec.storage if spec and spec.storage else None)
    if not url:
        from nova_search.search.lifecycle import DEFAULT_STORAGE

        url = DEFAULT_STORAGE
    what = (
        "storage" if not flag else "NOVA_STORAGE" if flag == os.environ.get("NOVA_STORAGE") else "--storage"
    )
    from nova_search.redact import control_character

    c = control_character(url)
    if c is not None:  # it names a file, goes into messages and the stored spec: never a terminal escape
        raise SpecError(f"{what}: the URL holds a control character ({c}); give it on one plain line")
    _refuse_in_memory(url, what)
    from nova_search.db import check_settings

    check_settings()  # NOVA_STORAGE_RETRY_S and the others: a bad one refused before anything is opened
    return url


def writable_storage(url: str) -> str:
    """``url``, for a command that writes (create, run, worker, node, db): a SQLite database whose
    folder (or file) cannot be written is refused here, saying why (a read-only mount, permissions),
    before Optuna or the lock file beside it meet it as a bare OSError. Exit 5, as for any storage
    that cannot be used. Other URLs are left to the storage layer."""
    import os

    from nova_search.db import check_sqlite_file, sqlite_path
    from nova_search.errors import StorageError

    try:
        path = sqlite_path(url)
    except NovaError:
        return url  # refused, with its own message, when it is opened
    check_sqlite_file(url)  # a FIFO or a device: refused before its lock file is made
    if path is None or path.startswith("file:"):
        return url
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    for place in (target, folder):
        if os.path.exists(place) and not os.access(place, os.W_OK):
            try:
                why = (
                    "a read-only file system" if os.statvfs(place).f_flag & os.ST_RDONLY else "no permission"
                )
            except OSError:
                why = "no permission"
            kind = "folder" if place == folder else "database file"
            raise StorageError(
                f"storage {url}: cannot write the {kind} {place} ({why}); a study's SQLite database needs "
                "a writable file and folder (its journal and lock file go beside it): use a writable path "
                "or PostgreSQL"
            )
    return url


_EMPTY_ENV = (
    "NOVA_STORAGE is set but empty (a missing secret?): give it a SQLAlchemy URL, or unset it to use "
    "--storage, the spec's storage or sqlite:///nova.db"
)


def _refuse_in_memory(url: str, what: str) -> None:
    """An in-memory SQLite database (``sqlite://``, ``sqlite:///:memory:``, ``mode=memory``) lives as long
    as the command: a study made there is lost at once, and no worker can join it."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - an unparseable URL is refused, with its own message, when opened
        return
    if parsed.get_backend_name() != "sqlite":
        return
    database = parsed.database or ""
    if database in ("", ":memory:") or "mode=memory" in url or database.startswith("file::memory:"):
        raise SpecError(
            f"{what} {url}: an in-memory SQLite database is lost when the command exits; "
            "give a file (sqlite:///nova.db) or a PostgreSQL URL"
        )


#: the highest GPU id a worker or node may be given (--gpus); a node has a few, a large one 16
MAX_GPU_ID = 1023


def parse_ints(
    text: str | None, flag: str, example: str, *, required: bool = False, maximum: int | None = None
) -> tuple[int, ...]:
    """A comma-separated list of integers >= 0 (> 0 when ``required``, which also forbids an empty list),
    each at most ``maximum``. ASCII digits only: Python's ``int`` also reads other scripts' digits
    (``int('٣')`` is 3), which no GPU id or level is written in, and would read 4,000 of them."""
    bad = SpecError(
        f"{flag} {_shown(text)}: give {'positive ' if required else ''}integers separated by commas "
        f"(digits 0-9), e.g. {example}"
    )
    words = [x.strip() for x in (text or "").split(",") if x.strip()]
    if any(not (w.isascii() and w.isdigit()) or len(w) > 12 for w in words):
        raise bad
    values = tuple(int(w) for w in words)
    if any(v < (1 if required else 0) for v in values) or (required and not values):
        raise bad
    if maximum is not None and any(v > maximum for v in values):
        raise SpecError(f"{flag} {_shown(text)}: {max(values)} is above {maximum}, the most accepted")
    return values


def _shown(text: str | None, limit: int = 60) -> str:
    """A flag's value for a message: quoted, control characters escaped, cut at ``limit``."""
    from nova_search.redact import one_line

    shown = one_line(text or "")
    return repr(shown if len(shown) <= limit else shown[:limit] + "...")


def bounded_number(flag: str, value: float | None, low: float, high: float, unit: str = "") -> None:
    """``value`` (a flag's) within ``low``..``high``, a finite number; SpecError naming the flag
    otherwise. Checked before any storage is opened."""
    import math

    def shown(x: float) -> str:
        return f"{int(x)}" if math.isfinite(x) and x == int(x) and abs(x) < 1e15 else f"{x:g}"

    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        raise SpecError(f"{flag} {shown(value)}: give a number from {shown(low)} to {shown(high)}{unit}")


def choice(flag: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise SpecError(f"{flag} {value!r}: valid values are {', '.join(valid)}")
    return value


def emit(text: str) -> None:
    """``text`` on stdout, a line break at its end. Every command's output goes through here: control
    characters in it (an engine's message, a stored argv or name, which an older study may hold) are
    escaped, lines and tabs kept (``redact.terminal_safe``), so that reading a study never steers the
    terminal (JSON escapes its own)."""
    from nova_search.redact import terminal_safe

    text = terminal_safe(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
