/* pocketmq._speedups: the module object, its method table and the reference registry.
 *
 * The registry is a plain dict, REFERENCES, that pocketmq.protocol.native fills with the
 * pure-Python functions; the native functions fall back to them for input off the fast path.
 */
#include "speedups.h"

#include <structmember.h>

/* A strong reference held for the life of the process, like the module itself. */
static PyObject *references;

PyObject *
pmq_references(void)
{
    return references;
}

PyObject *
pmq_call_reference(const char *name, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    PyObject *ref = PyDict_GetItemString(references, name);
    if (ref == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "pocketmq._speedups: no reference implementation registered for %s",
                     name);
        return NULL;
    }
    return PyObject_Vectorcall(ref, args, (size_t)nargs, kwnames);
}

int
pmq_int64_in(PyObject *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!PyLong_CheckExact(v)) {
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < lo || x > hi) {
        PyErr_Clear();
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

int
pmq_int_attr(PyObject *obj, PyObject *name, int64_t lo, int64_t hi, int64_t *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    int bad = pmq_int64_in(v, lo, hi, out);
    Py_DECREF(v);
    return bad;
}

int
pmq_slot_offsets(PyObject *cls, const char *const *names, int count, Py_ssize_t *offsets)
{
    const char *cls_name = ((PyTypeObject *)cls)->tp_name;
    PyObject *fields = PyObject_GetAttrString(cls, "__dataclass_fields__");
    if (fields == NULL) {
        return -1;
    }
    Py_ssize_t nfields = PyDict_Check(fields) ? PyDict_GET_SIZE(fields) : -1;
    Py_DECREF(fields);
    if (nfields != count) {
        PyErr_Format(PyExc_RuntimeError,
                     "pocketmq._speedups: %s has %zd fields, the extension knows %d: "
                     "rebuild it (pip install -e .) or set POCKETMQ_PURE_PYTHON=1",
                     cls_name, nfields, count);
        return -1;
    }
    for (int f = 0; f < count; f++) {
        PyObject *descr = PyObject_GetAttrString(cls, names[f]);
        if (descr == NULL) {
            return -1;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type)
                 && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX
                 && !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY);
        if (ok) {
            offsets[f] = ((PyMemberDescrObject *)descr)->d_member->offset;
        }
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_RuntimeError, "pocketmq._speedups: %s.%s is not a writable slot",
                         cls_name, names[f]);
            return -1;
        }
    }
    return 0;
}

static PyMethodDef speedups_methods[] = {
    {"java_string_hash", (PyCFunction)(void (*)(void))pmq_java_string_hash,
     METH_FASTCALL | METH_KEYWORDS,
     "Java's String.hashCode (signed 32-bit) over the UTF-16 code units of s."},
    {"java_string_hash_concat", (PyCFunction)(void (*)(void))pmq_java_string_hash_concat,
     METH_FASTCALL | METH_KEYWORDS,
     "hashCode of prefix + s from the prefix's hashCode, hashing only s."},
    {"encode_properties", (PyCFunction)(void (*)(void))pmq_encode_properties,
     METH_FASTCALL | METH_KEYWORDS,
     "Encode properties as RocketMQ does, with a trailing separator after each pair."},
    {"decode_properties", (PyCFunction)(void (*)(void))pmq_decode_properties,
     METH_FASTCALL | METH_KEYWORDS,
     "Decode a properties string; pairs without a name/value separator are skipped."},
    {"encode_records", (PyCFunction)(void (*)(void))pmq_encode_records,
     METH_FASTCALL | METH_KEYWORDS,
     "A put's records back to back, their sizes and sys flags (offsets and store time 0)."},
    {"put_one", (PyCFunction)(void (*)(void))pmq_put_one, METH_FASTCALL | METH_KEYWORDS,
     "A single message's record and consume-queue unit, as far as they go."},
    {"put_record", (PyCFunction)(void (*)(void))pmq_put_record, METH_FASTCALL | METH_KEYWORDS,
     "Encode one message's record, take its queue offset and place it, if it fits."},
    {"place_records", (PyCFunction)(void (*)(void))pmq_place_records,
     METH_FASTCALL | METH_KEYWORDS,
     "Copy encoded records into a buffer with their offsets and store time, first size last."},
    {"decode_batch_body", (PyCFunction)(void (*)(void))pmq_decode_batch_body,
     METH_FASTCALL | METH_KEYWORDS,
     "Split a batch send's body into (flag, body, properties)."},
    {"batch_messages", (PyCFunction)(void (*)(void))pmq_batch_messages,
     METH_FASTCALL | METH_KEYWORDS,
     "The messages of a batch send's body, each the base's copy with its entry's fields."},
    {"decode_message", (PyCFunction)(void (*)(void))pmq_decode_message,
     METH_FASTCALL | METH_KEYWORDS,
     "Decode a whole record into a MessageExt (MessageDecoder.decode)."},
    {"decode_pull_body", (PyCFunction)(void (*)(void))pmq_decode_pull_body,
     METH_FASTCALL | METH_KEYWORDS,
     "The messages of a pull answer's body, in order, as a consumer sees them."},
    {"add_record", (PyCFunction)(void (*)(void))pmq_add_record, METH_FASTCALL | METH_KEYWORDS,
     "Decode a CommitLog record into a Spark reader's columns: (size, phy_offset, queue_offset)."},
    {"hold_messages", (PyCFunction)(void (*)(void))pmq_hold_messages,
     METH_FASTCALL | METH_KEYWORDS,
     "Add a pulled batch to a process queue's messages by offset: (bytes added, highest)."},
    {"release_messages", (PyCFunction)(void (*)(void))pmq_release_messages,
     METH_FASTCALL | METH_KEYWORDS,
     "Remove consumed messages from a process queue's messages by offset: bytes freed."},
    {"index_put_requests", (PyCFunction)(void (*)(void))pmq_index_put_requests,
     METH_FASTCALL | METH_KEYWORDS,
     "Insert the keys of a put's dispatch requests into an index file's mapping."},
    {"dispatch_requests", (PyCFunction)(void (*)(void))pmq_dispatch_requests,
     METH_FASTCALL | METH_KEYWORDS,
     "The dispatch requests of a put's records placed back to back from phy_offset."},
    {"consume_queue_put_requests",
     (PyCFunction)(void (*)(void))pmq_consume_queue_put_requests, METH_FASTCALL | METH_KEYWORDS,
     "Write a queue's run of consume-queue units into a mapping, below the reservation."},
    {"pull_scan", (PyCFunction)(void (*)(void))pmq_pull_scan, METH_FASTCALL | METH_KEYWORDS,
     "A pull's consume-queue walk, its records copied from the CommitLog into one body."},
    {"offset_msg_ids_text", (PyCFunction)(void (*)(void))pmq_offset_msg_ids_text,
     METH_FASTCALL | METH_KEYWORDS,
     "A batch's offset message ids on a host (host_to_bytes's form), comma-separated."},
    {"encode_batch_body", (PyCFunction)(void (*)(void))pmq_encode_batch_body,
     METH_FASTCALL | METH_KEYWORDS,
     "The body of a batch send of a list or tuple of messages."},
    {"decode_frame", (PyCFunction)(void (*)(void))pmq_decode_frame,
     METH_FASTCALL | METH_KEYWORDS,
     "A remoting frame without its length prefix as a RemotingCommand."},
    {"next_frame", (PyCFunction)(void (*)(void))pmq_next_frame,
     METH_FASTCALL | METH_KEYWORDS,
     "The command of the frame at buf[pos:] of a bytearray and where the next starts, or None."},
    {"encode_frame_head", (PyCFunction)(void (*)(void))pmq_encode_frame_head,
     METH_FASTCALL | METH_KEYWORDS,
     "A command's length prefix and header: its frame but the body."},
    {"send_header", (PyCFunction)(void (*)(void))pmq_send_header,
     METH_FASTCALL | METH_KEYWORDS,
     "A send request's header fields, read and checked (SendMessageRequestHeader, V1 or V2)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pocketmq._speedups",
    .m_doc = "Native implementations of pocketmq's per-message hot path. Use them through "
             "pocketmq.protocol.native, which registers the pure-Python references.",
    .m_size = -1,
    .m_methods = speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    if (pmq_records_init() < 0 || pmq_index_init() < 0 || pmq_dispatch_init() < 0
        || pmq_pull_init() < 0 || pmq_send_header_init() < 0 || pmq_put_one_init() < 0) {
        Py_DECREF(module);
        return NULL;
    }
    if (references == NULL) {
        references = PyDict_New();
        if (references == NULL) {
            Py_DECREF(module);
            return NULL;
        }
    }
    if (PyModule_AddObjectRef(module, "REFERENCES", references) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
