/* pocketmq._speedups: shared declarations of the extension's translation units.
 *
 * Every function takes the exact types the hot path passes (str, dict of str, int) and hands
 * any other input to the pure-Python reference registered under its name in REFERENCES, so
 * that unusual input (a str subclass, a non-str value, keywords) behaves and fails exactly as
 * the reference does.
 */
#ifndef POCKETMQ_SPEEDUPS_H
#define POCKETMQ_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The registry of references (borrowed; it lives as long as the process). */
PyObject *pmq_references(void);

/* Calls the reference implementation registered as `name` with the same arguments. */
PyObject *pmq_call_reference(const char *name, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

PyObject *pmq_java_string_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *pmq_java_string_hash_concat(PyObject *module, PyObject *const *args,
                                      Py_ssize_t nargs, PyObject *kwnames);
PyObject *pmq_encode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_decode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_decode_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *pmq_decode_pull_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);

#endif
