# Types for the compiled build of shard/core.py (Cython reads this beside core.py; the pure
# build ignores it): the engine typed where a turn asks it whether a timer is due.
from shardq.engine.core cimport EngineCore
