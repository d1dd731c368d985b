# Types for the compiled build of home.py (Cython reads this beside home.py; the pure
# build ignores it): the process's state and the connection as C structs, the read as bytes,
# positions as C integers.
cimport cython
from shardq.processes.serving.conn cimport Conn
from shardq.processes.serving.state cimport ServingState

cpdef bint can_serve_home(ServingState self, Conn conn)

@cython.locals(pos=Py_ssize_t, nl=Py_ssize_t, end=Py_ssize_t, start=Py_ssize_t,
               stop=Py_ssize_t, first=Py_ssize_t, out=bytearray, stats=dict,
               fields=list)
cpdef Py_ssize_t serve_home(ServingState self, Conn conn, bytes data)
