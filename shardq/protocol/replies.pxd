# Types for the compiled build of replies.py (Cython reads this beside replies.py; the pure
# build ignores it): the fast path's replies written in C.
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.string cimport memcpy

cpdef bytes put_reply(job_id, taken)
cpdef bytes job_reply(bytes word, unsigned long long job_id, bytes body)
cdef bytes _line(bytes word, unsigned long long number)
cdef Py_ssize_t digits(unsigned long long number) noexcept
cdef void put_digits(char *at, Py_ssize_t end, unsigned long long number) noexcept
