# The C library's epoll for the compiled build of poller.py (the pure build ignores this).
cimport cython
from libc.errno cimport errno, EINTR
from cpython.exc cimport PyErr_CheckSignals

cdef extern from "sys/epoll.h" nogil:
    ctypedef union epoll_data_t:
        int fd
    cdef struct epoll_event:
        unsigned int events
        epoll_data_t data
    int epoll_wait(int epfd, epoll_event *events, int maxevents, int timeout)

cdef enum:
    MAX_EVENTS = 1024  #: events taken in one wait; the rest come with the next (level-triggered)

cdef epoll_event FIRED[MAX_EVENTS]  #: where a wait puts what fired (one loop per process)

cpdef object item(object key, Py_ssize_t i)
