"""The engine's small vocabularies: what a reserve answered, and the kinds of timer.

Named once here, for the engine's modules; `engine` re-exports them to the upper layers.
"""

from __future__ import annotations

# Kinds of reserve outcome, sent to the serving process with the reply bytes (see reserve.py).
RESERVED, OFFER, WAITING, FINAL, CANCELLED, NONE_BETTER = 1, 2, 3, 4, 5, 6

# Timer kinds in the engine's heap (`_at`; what each does when it fires: timers.py).
T_DELAY, T_TTR, T_PAUSE, T_WAIT, T_AGE, T_TOKEN = 1, 2, 3, 4, 5, 6

TIMERS_MIN_BOUND = 4096  #: the timer heap is never compacted below this size (timers.py)
#: A reserve's TTR timer waits this long among the `fresh` before it joins the heap
#: (timers.py): most reserved jobs are deleted sooner, and never cost the heap a push nor a
#: compaction. Less than the least TTR (1 s), so a timer is in the heap before it is due.
FRESH_NS = 250_000_000
