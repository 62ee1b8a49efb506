/* offset_msg_ids_text: a batch's offset message ids, comma-separated, as its send answer
 * carries them (pocketmq.protocol.message). No I/O here.
 *
 * Takes exact bytes and an exact list of exact ints that fit a signed 64-bit field; anything
 * else (an int past 64 bits, which the reference masks; a non-int, on which it raises) goes to
 * the reference. Nothing here runs Python code, so the list cannot change under the walk.
 */
#include "speedups.h"

#include <string.h>

static const char HEX[16] = "0123456789ABCDEF";

PyObject *
pmq_offset_msg_ids_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 2 || !PyBytes_CheckExact(args[0])
        || !PyList_CheckExact(args[1])) {
        return pmq_call_reference("offset_msg_ids_text", args, nargs, kwnames);
    }
    const unsigned char *host = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t host_len = PyBytes_GET_SIZE(args[0]), n = PyList_GET_SIZE(args[1]);
    if (host_len > (PY_SSIZE_T_MAX - 17) / 2) {
        return PyErr_NoMemory();
    }
    /* Each id is the host's hex and 16 digits, a comma after every id but the last. */
    Py_ssize_t id_len = 2 * host_len + 16;
    if (n > PY_SSIZE_T_MAX / (id_len + 1)) {
        return PyErr_NoMemory();
    }
    PyObject *out = PyUnicode_New(n ? n * (id_len + 1) - 1 : 0, 127);
    if (out == NULL) {
        return NULL;
    }
    Py_UCS1 *p = PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t phy;
        if (pmq_int64_in(PyList_GET_ITEM(args[1], i), INT64_MIN, INT64_MAX, &phy) < 0) {
            Py_DECREF(out);
            return pmq_call_reference("offset_msg_ids_text", args, nargs, kwnames);
        }
        if (i == 0) {
            for (Py_ssize_t k = 0; k < host_len; k++) {
                p[2 * k] = (Py_UCS1)HEX[host[k] >> 4];
                p[2 * k + 1] = (Py_UCS1)HEX[host[k] & 0xF];
            }
        } else {
            *p++ = ',';
            memcpy(p, PyUnicode_1BYTE_DATA(out), (size_t)(2 * host_len));
        }
        p += 2 * host_len;
        uint64_t v = (uint64_t)phy;
        for (int k = 15; k >= 0; k--) {
            p[k] = (Py_UCS1)HEX[v & 0xF];
            v >>= 4;
        }
        p += 16;
    }
    return out;
}
