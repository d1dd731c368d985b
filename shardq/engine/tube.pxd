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
    cdef public long long urgent
    cdef public long long reserved
    cdef public long long offered
    cdef public long long total_jobs
    cdef public long long using
    cdef public long long watching
    cdef public long long cmd_delete
    cdef public long long cmd_pause
    cdef public long long pause
    cdef public long long unpause_at
    cdef public long long body_bytes
    cdef public object policy
    cdef public object by_age
    cdef public long long discarded
    cdef public long long policy_buried
    cdef public long long expired
    cdef public long long fanned
    cdef public long long moved
    cdef public object throttle
    cdef public long long held

    cpdef jobs(self)
    cpdef bint in_use(self)
    cpdef bint closed(self, now)
    cpdef add_ready(self, Job job)
    cpdef remove_ready(self, Job job)
