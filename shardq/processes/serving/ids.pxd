# Typed layout of ids.py's IdLeases for the compiled build (Cython reads this beside ids.py).

cimport cython
from shardq.cluster.routing cimport block_shard, id_block

cdef long long HALF_BLOCK

cdef class IdLeases:
    cdef public object shard_count
    cdef public object ask
    cdef public object on_error
    cdef public dict blocks
    cdef public dict next_id
    cdef public dict end_id
    cdef public dict spare
    cdef public dict leasing
    cdef public dict waiters
    cdef public object loaded
    cdef public long long last_block
    cdef public long long last_shard

    cpdef take(self, shard)
    cpdef bint has_id(self, shard)
    cpdef lease(self, shard)
    @cython.locals(block=cython.longlong)
    cpdef job_shard(self, job_id)
