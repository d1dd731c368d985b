# For the compiled build of routing.py (Cython reads this beside routing.py; the pure build
# ignores it): an id's block as a C call from the serving path (serving/ids.py).

cpdef id_block(job_id)
