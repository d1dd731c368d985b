from shardq.engine.job cimport Job

cdef long long BLOCK, SHIFT, SLOT_MASK, SPARSE_LIVE

cdef class Block:
    cdef public list slots
    cdef public Py_ssize_t live
    cdef public Py_ssize_t top

cdef class JobTable:
    cdef public dict blocks
    cdef public dict sparse
    cdef public dict sparse_blocks
    cdef public Py_ssize_t count
    cdef public long long last_no
    cdef public Block last

    cpdef Block _block(self, long long no)
    cpdef _look_at(self, long long no, Block block)
    cpdef _drop(self, long long no)
    cpdef Job get(self, unsigned long long job_id)
    cpdef add(self, unsigned long long job_id, Job job)
    cpdef Job pop(self, unsigned long long job_id)
    cpdef _thin_out(self, long long no, Block block)
    cpdef Job _pop_sparse(self, long long no, unsigned long long job_id)
