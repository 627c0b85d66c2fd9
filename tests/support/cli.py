"""The real ``nova-search`` command line, run as users run it: a subprocess of ``python -m nova_search``
from the repository root. NOVA_STORAGE is not inherited (each test names its storage) unless given."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import REPO


def nova(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "NOVA_STORAGE"}
    return subprocess.run(
        [sys.executable, "-m", "nova_search", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
    )


def nova_ok(*args: str, **kw: object) -> str:
    """stdout of a command that must succeed (its stderr in the failure message otherwise)."""
    r = nova(*args, **kw)  # type: ignore[arg-type]
    assert r.returncode == 0, f"nova-search {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return r.stdout
