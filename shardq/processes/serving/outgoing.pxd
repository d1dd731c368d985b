from shardq.processes.serving.conn cimport Conn

cdef class Outgoing:
    cdef public list conns

    cpdef add(self, Conn conn)
    cpdef discard(self, Conn conn)
    cpdef list take(self)
