cdef class ReadyHeap(list):
    cdef public object gone
    cdef public Py_ssize_t live

    cpdef add(self, key)
    cpdef remove(self, key)
    cpdef first(self)
    cpdef rebuild(self)
