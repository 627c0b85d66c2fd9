"""The stand-in as a process: ``python -m nova_search.testing.standin --port 8000 --tokens-per-chunk 3``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import fields

from nova_search.testing import standin
from nova_search.testing.standin.options import StandinOptions
from nova_search.testing.standin.serving import serve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m nova_search.testing.standin", description=standin.__doc__.split("\n")[0]
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0: any free port (printed)")
    p.add_argument("--reuse-port", action="store_true", help="SO_REUSEPORT, to run several processes")
    defaults = StandinOptions()
    for f in fields(StandinOptions):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif f.name in ("api_key", "num_spec_tokens", "tokenizer"):
            p.add_argument(flag, type=int if f.name == "num_spec_tokens" else str, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default)
    args = p.parse_args(argv)
    options = StandinOptions(**{f.name: getattr(args, f.name) for f in fields(StandinOptions)})
    asyncio.run(serve(options, args.host, args.port, args.reuse_port))


if __name__ == "__main__":
    sys.exit(main())
