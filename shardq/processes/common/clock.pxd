# The C library's clocks for the compiled build of clock.py (the pure build ignores this).
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC, CLOCK_REALTIME
from posix.types cimport clockid_t

cdef long long NS

cpdef long long monotonic() except? -1
cpdef long long wall() except? -1
cdef long long read_clock(clockid_t clock_id) noexcept
