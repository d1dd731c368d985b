from shardq.engine.job cimport Job, new_job
from shardq.engine.holders cimport Holders
from shardq.engine.jobtable cimport JobTable
from shardq.engine.packed cimport low, pack
from shardq.engine.tube cimport Tube
from shardq.protocol.replies cimport job_reply, job_reply_into

cdef long long OVERHEAD

cdef class EngineCore:
    cdef public long long _created
    cdef public long long _stamp
    cdef public long long _timers_bound
    cdef public list fresh
    cdef public Py_ssize_t fresh_head
    cdef public Py_ssize_t _fresh_bound
    cdef public object audit
    cdef public object buckets
    cdef public object copy_id
    cdef public list events
    cdef public object families
    cdef public object heads_touched
    cdef public long long job_timeouts
    cdef public JobTable jobs
    cdef public long long live_bytes
    cdef public object log_stats
    cdef public object origin_refs
    cdef public Holders owned
    cdef public bint policed
    cdef public object policies
    cdef public object shard_index
    cdef public list timers
    cdef public object timing
    cdef public long long total_jobs
    cdef public dict tubes
    cdef public dict waiters
    cdef public object wal_out
    cdef public long long wall_offset

    cpdef ensure_tube(self, str name, now)
    cpdef _gc(self, Tube tube)
    cpdef _remove(self, Job job, Tube tube, now, job_id=*)
    cpdef _enqueue(self, Job job, now)
    cpdef _at(self, when, kind, key)
    cpdef _unlink(self, Job job)
    cpdef _unreserve(self, Job job, job_id=*, owner=*)
    cpdef tuple _reserve(self, Job job, conn, now, str op=*)
    cpdef _best_job(self, tubes, now)
    cpdef bint due(self, now)
    cpdef put(self, job_id, seq, str tube_name, pri, delay, ttr, bytes body, now)
    cpdef bytes delete(self, conn, job_id, now, resent=*)
    cpdef list _hand_over(self, Job job, conn, bint offer, now)
    cpdef reserve(self, conn, rid, tubes, now, timeout_at, soon_at, bint offer=*, bytearray out=*)

cpdef list reserved_fields(job_id, bytes body, deadline)
