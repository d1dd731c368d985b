from shardq.engine.core cimport EngineCore
from shardq.engine.job cimport Job
from shardq.engine.jobtable cimport JobTable
from shardq.engine.tube cimport Tube

cpdef bint ttr_set_by(Job job, object when)
