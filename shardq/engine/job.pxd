cimport cython
from shardq.engine.packed cimport pack

cdef class Job:
    cdef public object key
    cdef public object tube
    cdef public object dur
    cdef public object body
    cdef public object state
    cdef public object hold
    # no cpdef methods: a vtable pointer would make every job 8 bytes bigger (88, not 80)

@cython.locals(job=Job)  # its fields set as a struct's
cpdef Job new_job(job_id, seq, str tube, pri, delay, ttr, bytes body, now)
