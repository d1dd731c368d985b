# Typed layout of state.py's ServingState for the compiled build.

cimport cython
from shardq.processes.common.clock cimport wall
from shardq.processes.serving.ids cimport IdLeases
from shardq.processes.serving.outgoing cimport Outgoing
from shardq.processes.shard.direct cimport Direct

cdef class ServingState:
    cdef public object accept_paused_until
    cdef public object accepting
    cdef public object allow
    cdef public set backlog
    cdef public object conn_limit
    cdef public object connections_denied
    cdef public object connections_refused
    cdef public dict conns
    cdef public dict cross
    cdef public Outgoing dirty
    cdef public object draining
    cdef public object handovers
    cdef public object handshake_s
    cdef public object handshakes
    cdef public object home_ok
    cdef public object hosted
    cdef public Direct hosted_core
    cdef public long long home_puts
    cdef public long long home_reserves
    cdef public long long home_timed_reserves
    cdef public long long home_deletes
    cdef public object hosted_index
    cdef public dict hosted_out
    cdef public IdLeases ids
    cdef public object index
    cdef public dict inflight
    cdef public long long last_stamp
    cdef public object listener
    cdef public object max_clients
    cdef public object max_connections
    cdef public object max_handshakes
    cdef public object max_input
    cdef public object max_job_size
    cdef public object max_output
    cdef public object next_conn
    cdef public object next_rid
    cdef public object oom_logged_at
    cdef public object output_closed
    cdef public dict outq
    cdef public object peer_heads
    cdef public dict pending
    cdef public object private
    cdef public bytearray rbuf
    cdef public object ready_fd
    cdef public object retry_soon
    cdef public object retrying
    cdef public object run_dir
    cdef public object rview
    cdef public object seen_up
    cdef public object sel
    cdef public object serving
    cdef public object shard_count
    cdef public object socks
    cdef public object spin_backoff
    cdef public object spin_s
    cdef public object spin_skip
    cdef public dict stats
    cdef public object target_of
    cdef public object timers
    cdef public object tls
    cdef public object tls_failed
    cdef public object total_connections
    cdef public set touched
    cdef public object tube_shards
    cdef public object up
    cdef public object worked

    @cython.locals(stamp=cython.longlong)
    cpdef long long put_stamp(self) except? -1
    cpdef new_rid(self)
