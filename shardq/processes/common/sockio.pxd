# The C library's calls for the compiled build of sockio.py (the pure build ignores this).
cimport cython
from posix.unistd cimport read as c_read, write as c_write
from libc.errno cimport errno
from libc.string cimport memcpy
from cpython.bytearray cimport PyByteArray_Resize, PyByteArray_AS_STRING

cpdef long recv_into(object sock, long fd, bytearray buf) except? -1
cpdef long send(object sock, long fd, bytearray data) except? -1
cpdef bytes head(bytearray buf, Py_ssize_t n)
cdef long checked(long n) except? -1
@cython.locals(n=Py_ssize_t, size=Py_ssize_t)
cpdef add(bytearray out, bytes data)
cpdef drop(bytearray out, Py_ssize_t n)
