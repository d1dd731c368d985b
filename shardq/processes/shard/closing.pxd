# For the compiled build of closing.py (Cython reads this beside closing.py; the pure build
# ignores it): the holds a shard's turn asks about every time, read as a C struct's fields.
cdef class Closing:
    cdef public dict holds
    cdef public object deferred
    cdef public bint lifted
