# Types for the compiled build of waiting.py (Cython reads this beside waiting.py; the pure
# build ignores it): the process's state read as a C struct's.
from shardq.processes.serving.state cimport ServingState
