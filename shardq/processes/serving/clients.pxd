# Types for the compiled build of clients.py (Cython reads this beside clients.py; the pure
# build ignores it): the process's state and the connection as C structs.
cimport cython
from shardq.processes.serving.conn cimport Conn
from shardq.processes.serving.state cimport ServingState
from shardq.processes.serving.home cimport can_serve_home, serve_home
from shardq.processes.common cimport sockio

cdef long WRITABLE

cpdef reply(ServingState self, Conn conn, bytes data)
@cython.locals(conn=Conn, moves=bint)
cpdef flush_output(ServingState self)
cpdef finish(ServingState self, Conn conn)
@cython.locals(sent=Py_ssize_t)
cpdef write(ServingState self, Conn conn)
cpdef interest(ServingState self, Conn conn)
@cython.locals(n=Py_ssize_t, used=Py_ssize_t)
cpdef read(ServingState self, Conn conn)
