"""``python -m nova_search.results.schemas --write``: regenerate the shipped JSON Schemas from the
models; ``--check``: exit 1 naming the files that are not current."""

from __future__ import annotations

import argparse
import sys

from nova_search.results.schemas import stale, write


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m nova_search.results.schemas", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="regenerate every schema file")
    group.add_argument("--check", action="store_true", help="fail when a schema file is not current")
    args = parser.parse_args()
    if args.write:
        for name in write():
            print(f"wrote {name}")
        return 0
    if bad := stale():
        print(f"not current: {', '.join(bad)}: run python -m nova_search.results.schemas --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
