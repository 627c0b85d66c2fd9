"""``python -m nova_search`` is the ``nova-search`` command."""

from nova_search.cli import main

main()
