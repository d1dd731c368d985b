# Typed layout of conn.py's classes for the compiled build (Cython reads this beside conn.py).

from shardq.protocol.parser cimport Parser

cdef class Conn:
    cdef public object id
    cdef public object sock
    cdef public long fd
    cdef public Parser parser
    cdef public long long max_job_size
    cdef public bytearray out
    cdef public object use
    cdef public list watch
    cdef public object phase
    cdef public dict reserved
    cdef public object producer
    cdef public object worker
    cdef public object eof
    cdef public object waiting
    cdef public set shards
    cdef public long events
    cdef public object paused
    cdef public object piped
    cdef public object pipe_target
    cdef public object held
    cdef public object pumping
    cdef public object away
    cdef public object leaving
    cdef public object moves
    cdef public object handshaking
    cdef public object offered
    cdef public list deadlines
    cdef public bint dirty

    cpdef step(self, str event)
    cpdef hold(self, job_id, deadline)
    cpdef let_go(self, job_id)
    cpdef soon_at(self, now)

cdef class CrossReserve:
    cdef public object conn
    cdef public object rids
    cdef public object tubes
    cdef public object live
    cdef public object answered
    cdef public object offers
    cdef public object done
    cdef public object expire_at
    cdef public object reply
    cdef public object answer
