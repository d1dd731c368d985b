from shardq.engine.core cimport EngineCore, reserved_fields
from shardq.engine.job cimport Job
from shardq.engine.tube cimport Tube
