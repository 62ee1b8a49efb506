/* Java's String.hashCode over the UTF-16 code units of a str. No I/O here.
 *
 * h = 31 * h + unit, modulo 2**32, read as a signed 32-bit int. A code point above U+FFFF
 * counts as its two surrogate units. A lone surrogate cannot be encoded as UTF-16: the
 * reference raises UnicodeEncodeError for it, so such strings go to the reference.
 */
#include "speedups.h"

#include <stdint.h>

int
pmq_utf16_hash(PyObject *s, uint32_t h, uint32_t *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const void *data = PyUnicode_DATA(s);
    switch (PyUnicode_KIND(s)) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            h = 31u * h + p[i];
        }
        break;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS2 c = p[i];
            if (c >= 0xD800 && c <= 0xDFFF) {
                return 1;
            }
            h = 31u * h + c;
        }
        break;
    }
    default: {
        const Py_UCS4 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = p[i];
            if (c >= 0x10000) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            } else if (c >= 0xD800 && c <= 0xDFFF) {
                return 1;
            } else {
                h = 31u * h + c;
            }
        }
        break;
    }
    }
    *out = h;
    return 0;
}

static PyObject *
signed_int32(uint32_t h)
{
    return PyLong_FromLong((long)(int32_t)h);
}

PyObject *
pmq_java_string_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    uint32_t h;
    if (kwnames != NULL || nargs != 1 || !PyUnicode_CheckExact(args[0])
        || PyUnicode_READY(args[0]) < 0 || pmq_utf16_hash(args[0], 0, &h)) {
        PyErr_Clear();
        return pmq_call_reference("java_string_hash", args, nargs, kwnames);
    }
    return signed_int32(h);
}

PyObject *
pmq_java_string_hash_concat(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    (void)module;
    uint32_t h;
    if (kwnames != NULL || nargs != 2 || !PyLong_CheckExact(args[0])
        || !PyUnicode_CheckExact(args[1]) || PyUnicode_READY(args[1]) < 0) {
        PyErr_Clear();
        return pmq_call_reference("java_string_hash_concat", args, nargs, kwnames);
    }
    /* The low 32 bits, two's complement for negative ints, as `prefix & 0xFFFFFFFF`. */
    unsigned long prefix = PyLong_AsUnsignedLongMask(args[0]);
    if (prefix == (unsigned long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    /* hash(prefix + s) = hash(prefix) * 31**len(s) + hash(s): the loop seeded with the
       prefix's hash computes exactly that. */
    if (pmq_utf16_hash(args[1], (uint32_t)prefix, &h)) {
        return pmq_call_reference("java_string_hash_concat", args, nargs, kwnames);
    }
    return signed_int32(h);
}
