from shardq.engine.core cimport EngineCore
from shardq.engine.job cimport Job
from shardq.engine.tube cimport Tube
from shardq.protocol.replies cimport job_reply

cpdef list _reserved(job_id, bytes body, deadline)
