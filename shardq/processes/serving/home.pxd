# Types for the compiled build of home.py (Cython reads this beside home.py; the pure
# build ignores it): the process's state and the connection as C structs, the read as bytes,
# positions as C integers.
from shardq.processes.common.clock cimport monotonic
from shardq.processes.common.sockio cimport add
cimport cython
from shardq.processes.serving.conn cimport Conn
from shardq.processes.shard.direct cimport Direct
from shardq.processes.serving.state cimport ServingState

cpdef bint can_serve_home(ServingState self, Conn conn)

cpdef bint all_home(object tube_shards, list tubes, object home)

cdef unsigned char P, R, D, SPACE
cdef Py_ssize_t TIMEOUT_AT, RESERVED_FIELDS, DIGITS_MAX, LINE_MAX
cdef long long FIELD_MAX, TIMEOUT_MAX

cdef class PutLine:
    cdef public long long pri, delay, ttr, size

cdef PutLine PUT_LINE

@cython.locals(pos=Py_ssize_t, nl=Py_ssize_t, end=Py_ssize_t, start=Py_ssize_t,
               stop=Py_ssize_t, first=Py_ssize_t, out=bytearray, line=PutLine, core=Direct,
               size=cython.longlong, max_output=Py_ssize_t, timeout=cython.longlong)
cpdef Py_ssize_t serve_home(ServingState self, Conn conn, bytes data)

@cython.locals(i=Py_ssize_t, value=cython.longlong, c=cython.uchar)
cpdef long long number(bytes data, Py_ssize_t start, Py_ssize_t stop)

@cython.locals(i=Py_ssize_t, n=Py_ssize_t)
cpdef bint has(bytes data, Py_ssize_t pos, bytes word)

@cython.locals(i=Py_ssize_t, value=cython.longlong, pri=cython.longlong,
               delay=cython.longlong, ttr=cython.longlong, digits=cython.int, n=cython.int,
               c=cython.uchar)
cpdef bint put_numbers(bytes data, Py_ssize_t start, Py_ssize_t stop, PutLine line)

@cython.locals(i=Py_ssize_t)
cpdef Py_ssize_t line_end(bytes data, Py_ssize_t start, Py_ssize_t stop)
