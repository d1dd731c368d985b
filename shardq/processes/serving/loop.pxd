# Types for the compiled build of loop.py (Cython reads this beside loop.py; the pure build
# ignores it): a client's read called as a C function from the turn; the connection, the
# process's state and the hosted engine typed.
from shardq.processes.common.clock cimport monotonic
from shardq.processes.common.poller cimport item
from shardq.engine.core cimport EngineCore
from shardq.processes.serving.clients cimport read as read_client
from shardq.processes.serving.conn cimport Conn
from shardq.processes.serving.state cimport ServingState
from shardq.processes.shard.direct cimport Direct
from shardq.processes.shard.server cimport ShardServer

cdef long READABLE, WRITABLE
