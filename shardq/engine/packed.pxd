# C for the compiled build of packed.py (the pure build ignores this): an int of three
# 64-bit fields made from its fields through its 24 bytes in little-endian order (CPython's
# own conversion), the low field read as a C integer.
from cpython.long cimport PyLong_AsUnsignedLongLongMask

cdef extern from *:
    """
    static PyObject *sq_pack(unsigned long long high, unsigned long long mid,
                             unsigned long long low) {
        unsigned char bytes[24];
        int i;
        for (i = 0; i < 8; i++) {
            bytes[i] = (unsigned char)(low >> (8 * i));
            bytes[8 + i] = (unsigned char)(mid >> (8 * i));
            bytes[16 + i] = (unsigned char)(high >> (8 * i));
        }
        return _PyLong_FromByteArray(bytes, 24, 1, 0);
    }

    """
    object sq_pack(unsigned long long high, unsigned long long mid, unsigned long long low)

cpdef object pack(unsigned long long high, unsigned long long mid, unsigned long long low)
cpdef unsigned long long low(object x) except? <unsigned long long>-1
