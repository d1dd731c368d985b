"""The tubes of the greenstalk client tests (tests/integration/test_greenstalk*.py)."""

from __future__ import annotations

#: With 4 shards, TUBES[:4] are on four different shards, and so are TUBES[4:]
#: (checked by test_greenstalk.py::test_tube_names_span_shards).
TUBES = ("bravo", "charlie", "delta", "alpha", "echo", "foxtrot", "hotel", "juliet")
