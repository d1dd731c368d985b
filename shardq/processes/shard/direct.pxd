# For the compiled build of direct.py (Cython reads this beside direct.py; the pure build
# ignores it): the state the direct calls read, as a C struct (ShardCore's first base), the
# calls themselves as C functions for the fast path (serving/home.py) and for every turn
# (loop.run_hosted), a put's reply made by a C call.
from shardq.protocol.replies cimport put_reply
from shardq.engine.core cimport EngineCore
from shardq.processes.shard.closing cimport Closing

cdef class Direct:
    cdef public object index
    cdef public object engine
    cdef public object wal
    cdef public object quota
    cdef public object log_fault
    cdef public object settling
    cdef public Closing closing
    cdef public dict waiting_peer
    cdef public object heads
    cdef public object event_log

    cpdef take_events(self, now, out)
    cpdef route_events(self, out)
    cpdef commit(self)

    cpdef bint admit(self, str tube, Py_ssize_t body_len)
    cpdef bytes put_local(self, job_id, seq, str tube, pri, delay, ttr, bytes body, now)
    cpdef bytes delete_local(self, conn, job_id, now)
    cpdef reserve_local(self, conn, rid, tuple tubes, now, timeout_at, soon_at, bytearray out=*)
