"""nova's alembic migrations (``env.py``, ``versions/``), shipped inside the package so that a plain
``pip install`` can run ``nova-search db upgrade``. alembic loads these files by path; nothing imports
them as modules."""
