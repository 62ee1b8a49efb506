/* Message properties: ``name \x01 value \x02`` repeated (MessageDecoder). No I/O here.
 *
 * encode_properties takes an exact dict whose names and values are exact str; anything else
 * (a dict subclass, an int value) goes to the reference, whose f-strings format it
 * (pmq_properties_text, shared with records.c, answers NULL without an exception for it).
 * The result is built in one allocation: every source str is canonical, so the widest source
 * kind is the result's canonical kind.
 *
 * decode_properties splits an exact str at every \x02, then each item at its first \x01;
 * items without one are skipped and a later duplicate name wins, as str.split/partition do.
 */
#include "speedups.h"

#define NAME_VALUE_SEPARATOR 0x01
#define PROPERTY_SEPARATOR 0x02

PyObject *
pmq_properties_text(PyObject *props)
{
    if (!PyDict_CheckExact(props)) {
        return NULL;
    }
    Py_ssize_t count = PyDict_GET_SIZE(props);
    Py_ssize_t pos = 0, total = 0;
    Py_UCS4 maxchar = 0x7F;
    PyObject *key, *value;
    while (PyDict_Next(props, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) {
            return NULL;
        }
        if (PyUnicode_READY(key) < 0 || PyUnicode_READY(value) < 0) {
            return NULL;
        }
        Py_ssize_t klen = PyUnicode_GET_LENGTH(key), vlen = PyUnicode_GET_LENGTH(value);
        if (klen > PY_SSIZE_T_MAX - 2 - total || vlen > PY_SSIZE_T_MAX - 2 - total - klen) {
            return PyErr_NoMemory();
        }
        total += klen + vlen + 2;
        Py_UCS4 kmax = PyUnicode_MAX_CHAR_VALUE(key), vmax = PyUnicode_MAX_CHAR_VALUE(value);
        if (kmax > maxchar) {
            maxchar = kmax;
        }
        if (vmax > maxchar) {
            maxchar = vmax;
        }
    }
    PyObject *result = PyUnicode_New(total, maxchar);
    if (result == NULL) {
        return NULL;
    }
    int kind = PyUnicode_KIND(result);
    void *data = PyUnicode_DATA(result);
    Py_ssize_t at = 0;
    pos = 0;
    while (PyDict_Next(props, &pos, &key, &value)) {
        Py_ssize_t klen = PyUnicode_GET_LENGTH(key), vlen = PyUnicode_GET_LENGTH(value);
        /* No Python code ran since the first pass, but a bounds check costs nothing. */
        if (PyDict_GET_SIZE(props) != count || klen + vlen + 2 > total - at) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return NULL;
        }
        if (PyUnicode_CopyCharacters(result, at, key, 0, klen) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        at += klen;
        PyUnicode_WRITE(kind, data, at, NAME_VALUE_SEPARATOR);
        at++;
        if (PyUnicode_CopyCharacters(result, at, value, 0, vlen) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        at += vlen;
        PyUnicode_WRITE(kind, data, at, PROPERTY_SEPARATOR);
        at++;
    }
    return result;
}

PyObject *
pmq_encode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 1) {
        return pmq_call_reference("encode_properties", args, nargs, kwnames);
    }
    PyObject *result = pmq_properties_text(args[0]);
    if (result == NULL && !PyErr_Occurred()) {
        return pmq_call_reference("encode_properties", args, nargs, kwnames);
    }
    return result;
}

PyObject *
pmq_decode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 1 || !PyUnicode_CheckExact(args[0])) {
        return pmq_call_reference("decode_properties", args, nargs, kwnames);
    }
    PyObject *text = args[0];
    if (PyUnicode_READY(text) < 0) {
        return NULL;
    }
    PyObject *result = PyDict_New();
    if (result == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0) {
        return result;
    }
    /* str.split yields one more item than there are separators, the last possibly empty. */
    for (Py_ssize_t start = 0; start <= n;) {
        Py_ssize_t end = PyUnicode_FindChar(text, PROPERTY_SEPARATOR, start, n, 1);
        if (end == -2) {
            goto fail;
        }
        if (end == -1) {
            end = n;
        }
        Py_ssize_t sep = PyUnicode_FindChar(text, NAME_VALUE_SEPARATOR, start, end, 1);
        if (sep == -2) {
            goto fail;
        }
        if (sep >= 0) {
            PyObject *name = PyUnicode_Substring(text, start, sep);
            if (name == NULL) {
                goto fail;
            }
            PyObject *value = PyUnicode_Substring(text, sep + 1, end);
            if (value == NULL) {
                Py_DECREF(name);
                goto fail;
            }
            int rc = PyDict_SetItem(result, name, value);
            Py_DECREF(name);
            Py_DECREF(value);
            if (rc < 0) {
                goto fail;
            }
        }
        start = end + 1;
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}
