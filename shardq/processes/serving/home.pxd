# Types for the compiled build of home.py (Cython reads this beside home.py; the pure
# build ignores it): the process's state and the connection as C structs, the read as bytes,
# positions as C integers.
cimport cython
from shardq.processes.serving.conn cimport Conn
from shardq.processes.serving.state cimport ServingState

cpdef bint can_serve_home(ServingState self, Conn conn)

@cython.locals(pos=Py_ssize_t, nl=Py_ssize_t, end=Py_ssize_t, start=Py_ssize_t,
               stop=Py_ssize_t, first=Py_ssize_t, out=bytearray)
cpdef Py_ssize_t serve_home(ServingState self, Conn conn, bytes data)

@cython.locals(i=Py_ssize_t, value=cython.longlong, c=cython.uchar)
cpdef long long number(bytes data, Py_ssize_t start, Py_ssize_t stop)

@cython.locals(i=Py_ssize_t, value=cython.longlong, pri=cython.longlong,
               delay=cython.longlong, ttr=cython.longlong, digits=cython.int, n=cython.int,
               c=cython.uchar)
cpdef tuple put_numbers(bytes data, Py_ssize_t start, Py_ssize_t stop)

@cython.locals(i=Py_ssize_t)
cpdef Py_ssize_t line_end(bytes data, Py_ssize_t start, Py_ssize_t stop)
