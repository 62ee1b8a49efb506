/* decode_batch_body: the body of a SEND_BATCH_MESSAGE split into (flag, body, properties)
 * (pocketmq.protocol.batch). No I/O here.
 *
 * Each message: total size (4) | magic (4) | body CRC (4) | flag (4) | body length (4) | body
 * | properties length (2) | properties, big-endian. Only a well-formed exact bytes body is
 * decoded here; anything else, a malformed message included, goes to the reference, which
 * raises the ProtocolError that says where and why.
 */
#include "speedups.h"

#define BATCH_HEAD 20

static int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* One message's (flag, body, properties) at data[pos], its end in *next; NULL without an
   exception when it is malformed, NULL with one on a real error. */
static PyObject *
batch_item(const unsigned char *data, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *next)
{
    if (n - pos < BATCH_HEAD) {
        return NULL;
    }
    int32_t total = be32(data + pos), flag = be32(data + pos + 12);
    int32_t body_len = be32(data + pos + 16);
    Py_ssize_t p = pos + BATCH_HEAD;
    if (body_len < 0 || body_len > n - p - 2) {
        return NULL;
    }
    const unsigned char *body = data + p;
    p += body_len;
    /* A signed 16-bit length, as the reference's ">h". */
    int16_t props_len = (int16_t)((uint16_t)data[p] << 8 | data[p + 1]);
    p += 2;
    if (props_len < 0 || props_len > n - p || total != p + props_len - pos) {
        return NULL;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data + p, props_len, "replace");
    if (text == NULL) {
        return NULL;
    }
    PyObject *props = pmq_decode_properties(NULL, &text, 1, NULL);
    Py_DECREF(text);
    if (props == NULL) {
        return NULL;
    }
    PyObject *item = Py_BuildValue("(iy#N)", flag, (const char *)body, (Py_ssize_t)body_len,
                                   props);
    *next = p + props_len;
    return item;
}

PyObject *
pmq_decode_batch_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 1 || !PyBytes_CheckExact(args[0])) {
        return pmq_call_reference("decode_batch_body", args, nargs, kwnames);
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]), pos = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    while (pos < n) {
        Py_ssize_t next = pos;
        PyObject *item = batch_item(data, n, pos, &next);
        if (item == NULL) {
            Py_DECREF(out);
            if (PyErr_Occurred()) {
                return NULL;
            }
            return pmq_call_reference("decode_batch_body", args, nargs, kwnames);
        }
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
        pos = next;
    }
    return out;
}
