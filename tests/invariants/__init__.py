"""Randomized invariant checking of a running server, from the client side.

``workload.py`` is the library (workload + checker), ``test_invariants.py`` its short form
for ``make test``, ``tools/stress.py`` its long form for ``make stress``.
"""
