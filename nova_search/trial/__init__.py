"""One trial, end to end (``run``): the chain of its stages. The concurrency sweep (``sweep``), a
window of load on a running server (``window``), the slot's leader around the trial (``leader``:
``prepare`` before the boot, ``settle`` after), measuring again against that leader on ABBA pairs
(``confirm``), the leader itself and its memory budget (``residency``), how a trial fails
(``failure``: ``classify``), its deadline (``deadline``), what it runs with (``context``), and
``nova-search bench`` (one server, one sweep, no study: ``bench``, its options validated once:
``bench_options``)."""
