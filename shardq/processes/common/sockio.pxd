# The C library's calls for the compiled build of sockio.py (the pure build ignores this).
from posix.unistd cimport read as c_read, write as c_write
from libc.errno cimport errno

cpdef long recv_into(object sock, long fd, bytearray buf) except? -1
cpdef long send(object sock, long fd, bytearray data) except? -1
cpdef bytes head(bytearray buf, Py_ssize_t n)
cdef long checked(long n) except? -1
