# For the compiled build of server.py (Cython reads this beside server.py; the pure build
# ignores it): the shell's state as a C struct, so the hosting serving process's turn
# (loop.run_hosted) reads its router and asks `held` as C calls.
cdef class ShardServer:
    cdef public object core
    cdef public object router
    cdef public object poll
    cdef public object wakeup
    cdef public list pending
    cdef public dict out

    cpdef bint held(self)
