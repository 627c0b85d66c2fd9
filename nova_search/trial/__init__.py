"""One trial, end to end (``run``): the chain of its stages. A window of load on a running server
(``window``), measuring again against the slot's resident leader on ABBA pairs (``confirm``), the
leader itself and its memory budget (``residency``), and ``nova-search bench`` (one server, one sweep,
no study: ``bench``)."""
