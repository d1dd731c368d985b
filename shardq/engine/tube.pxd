from shardq.engine.ready cimport ReadyHeap
from shardq.engine.job cimport Job

cdef class Waiter:
    cdef public object conn
    cdef public object rid
    cdef public object tubes
    cdef public object offer
    cdef public object expire_at
    cdef public object expire_reply


cdef class Tube:
    cdef public object name
    cdef public object order
    cdef public ReadyHeap ready
    cdef public object delayed
    cdef public dict buried
    cdef public dict waiters
    cdef public object urgent
    cdef public object reserved
    cdef public object offered
    cdef public object total_jobs
    cdef public object using
    cdef public object watching
    cdef public object cmd_delete
    cdef public object cmd_pause
    cdef public object pause
    cdef public object unpause_at
    cdef public object body_bytes
    cdef public object policy
    cdef public object by_age
    cdef public object discarded
    cdef public object policy_buried
    cdef public object expired
    cdef public object fanned
    cdef public object moved
    cdef public object throttle
    cdef public object held

    cpdef jobs(self)
    cpdef bint in_use(self)
    cpdef bint closed(self, now)
    cpdef add_ready(self, Job job)
    cpdef remove_ready(self, Job job)
