from shardq.engine.core cimport EngineCore
from shardq.engine.job cimport Job
from shardq.engine.tube cimport Tube

cpdef list _reserved(job_id, bytes body, deadline)
