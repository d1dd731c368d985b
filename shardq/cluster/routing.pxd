# For the compiled build of routing.py (Cython reads this beside routing.py; the pure build
# ignores it): an id's block and its shard as C calls from the serving path (serving/ids.py).

cpdef id_block(job_id)
cpdef default_shard(shards)
cpdef block_shard(block, shards)
