# Types for the compiled build of replies.py (Cython reads this beside replies.py; the pure
# build ignores it): the fast path's replies written in C.
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_Resize, PyByteArray_AS_STRING
from libc.string cimport memcpy

cdef char SPACE, CR, LF

cpdef bytes put_reply(job_id, taken)
cpdef bytes job_reply(bytes word, unsigned long long job_id, bytes body)
cpdef job_reply_into(bytearray out, bytes word, unsigned long long job_id, bytes body)
cdef Py_ssize_t _job_size(bytes word, unsigned long long job_id, bytes body) noexcept
cdef void _write_job(char *at, bytes word, unsigned long long job_id, bytes body) noexcept
cdef bytes _line(bytes word, unsigned long long number)
cdef Py_ssize_t digits(unsigned long long number) noexcept
cdef void put_digits(char *at, Py_ssize_t end, unsigned long long number) noexcept
