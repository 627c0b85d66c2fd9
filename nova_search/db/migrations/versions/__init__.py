"""nova's schema revisions, one file each (``NNNN_slug.py``), applied by ``nova-search db upgrade``."""
