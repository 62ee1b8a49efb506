/* A process queue's bookkeeping of pulled messages, one call per pulled batch instead of a
 * Python loop over its messages: hold_messages and release_messages, whose references are in
 * pocketmq/client/process_queue.py. No I/O here.
 *
 * The fast path takes an exact dict and an exact list of MessageExt (the class decode.c
 * builds) with int queue offsets and bytes bodies; it checks every message before it changes
 * the dict, and hands any other input to the reference, which then does the whole call. */
#include "speedups.h"

static PyObject *minus_one;

/* What release_messages raises when a finalizer it ran changed a message still to release. */
#define CHANGED "a message changed while release_messages ran"

/* The message type when args are (exact dict, exact list of fast messages); NULL otherwise,
 * with an exception set only when the type cannot be bound. */
static PyTypeObject *
fast_args(const char *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs != 2 || !PyDict_CheckExact(args[0])
        || !PyList_CheckExact(args[1])) {
        return NULL;
    }
    PyTypeObject *type = pmq_message_type(name);
    if (type == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[1]); i++) {
        PyObject *m = PyList_GET_ITEM(args[1], i);
        if (!Py_IS_TYPE(m, type)) {
            return NULL;
        }
        PyObject *offset = *pmq_message_slot(m, F_QUEUE_OFFSET);
        PyObject *body = *pmq_message_slot(m, F_BODY);
        if (offset == NULL || !PyLong_CheckExact(offset) || body == NULL
            || !PyBytes_CheckExact(body)) {
            return NULL;
        }
    }
    return type;
}

PyObject *
pmq_hold_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (fast_args("hold_messages", args, nargs, kwnames) == NULL) {
        return PyErr_Occurred() ? NULL
                                : pmq_call_reference("hold_messages", args, nargs, kwnames);
    }
    if (minus_one == NULL && (minus_one = PyLong_FromLong(-1)) == NULL) {
        return NULL;
    }
    PyObject *held = args[0], *msgs = args[1];
    Py_ssize_t size = 0;
    /* Int keys and int offsets: the dict's lookups and the comparisons run no Python code,
     * so the list cannot change under the loop. */
    PyObject *highest = minus_one;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(msgs); i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        PyObject *offset = *pmq_message_slot(m, F_QUEUE_OFFSET);
        int present = PyDict_Contains(held, offset);
        if (present < 0) {
            return NULL;
        }
        if (present) {
            continue;
        }
        if (PyDict_SetItem(held, offset, m) < 0) {
            return NULL;
        }
        size += PyBytes_GET_SIZE(*pmq_message_slot(m, F_BODY));
        int greater = PyObject_RichCompareBool(offset, highest, Py_GT);
        if (greater < 0) {
            return NULL;
        }
        if (greater) {
            highest = offset;
        }
    }
    return Py_BuildValue("(nO)", size, highest);
}

PyObject *
pmq_release_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    if (fast_args("release_messages", args, nargs, kwnames) == NULL) {
        return PyErr_Occurred() ? NULL
                                : pmq_call_reference("release_messages", args, nargs, kwnames);
    }
    /* Removing a held object may run its finalizer, which could change the list: the loop
     * walks a snapshot that keeps the checked messages alive. */
    PyObject *held = args[0], *msgs = PyList_AsTuple(args[1]);
    if (msgs == NULL) {
        return NULL;
    }
    Py_ssize_t freed = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(msgs); i++) {
        PyObject *m = PyTuple_GET_ITEM(msgs, i);
        PyObject *offset = *pmq_message_slot(m, F_QUEUE_OFFSET);
        if (offset == NULL || !PyLong_CheckExact(offset)) {
            PyErr_SetString(PyExc_RuntimeError, CHANGED);
            Py_DECREF(msgs);
            return NULL;
        }
        PyObject *was = PyDict_GetItemWithError(held, offset);
        if (was == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(msgs);
                return NULL;
            }
            continue;
        }
        int counted = was != Py_None;
        if (PyDict_DelItem(held, offset) < 0) {
            Py_DECREF(msgs);
            return NULL;
        }
        if (counted) {
            PyObject *body = *pmq_message_slot(m, F_BODY);
            if (body == NULL || !PyBytes_CheckExact(body)) {
                PyErr_SetString(PyExc_RuntimeError, CHANGED);
                Py_DECREF(msgs);
                return NULL;
            }
            freed += PyBytes_GET_SIZE(body);
        }
    }
    Py_DECREF(msgs);
    return PyLong_FromSsize_t(freed);
}
