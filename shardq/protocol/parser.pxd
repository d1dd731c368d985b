# Typed layout of parser.py's Parser for the compiled build (Cython reads this beside it).

cdef class Parser:
    cdef public bytearray _buf
    cdef public Py_ssize_t _pos
    cdef public object _max_job_size
    cdef public object _put
    cdef public object _skip
    cdef public bint _overlong

    cpdef bint at_rest(self)
