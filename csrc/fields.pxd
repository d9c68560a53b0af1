# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The fields of a CoNLL line in bytes, shared by the byte reader (textio.pyx) and the feature
encoder (encode.pyx): white space is what Python's str.split() splits at among ASCII bytes."""

from libc.stdint cimport uint8_t

cdef extern from *:
    """
    /* 1 for the bytes str.split() treats as white space: tab to CR, the separators 0x1C-0x1F, space */
    static const unsigned char crftk_ws[256] = {
        [0x09] = 1, [0x0A] = 1, [0x0B] = 1, [0x0C] = 1, [0x0D] = 1,
        [0x1C] = 1, [0x1D] = 1, [0x1E] = 1, [0x1F] = 1, [0x20] = 1,
    };
    """
    const unsigned char WS "crftk_ws" [256]


cdef inline int split_fields(const uint8_t* p, Py_ssize_t n, Py_ssize_t* starts, Py_ssize_t* ends,
                             int cap) noexcept nogil:
    """Split p[:n] at ASCII white space; the first cap fields' bounds; returns the field count."""
    cdef Py_ssize_t i = 0, j
    cdef int k = 0
    while True:
        while i < n and WS[p[i]]:
            i += 1
        if i >= n:
            return k
        j = i
        while j < n and not WS[p[j]]:
            j += 1
        if k < cap:
            starts[k] = i
            ends[k] = j
        k += 1
        i = j
