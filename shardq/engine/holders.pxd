cdef class Holders:
    cdef public dict by_conn

    cpdef own(self, conn, job_id)
    cpdef disown(self, conn, job_id)
    cpdef list ids(self, conn)
