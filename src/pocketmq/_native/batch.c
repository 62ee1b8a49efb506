/* decode_batch_body: the body of a SEND_BATCH_MESSAGE split into (flag, body, properties),
 * and batch_messages: the MessageExt of each (pocketmq.protocol.batch). No I/O here.
 *
 * Each message: total size (4) | magic (4) | body CRC (4) | flag (4) | body length (4) | body
 * | properties length (2) | properties, big-endian. Only a well-formed exact bytes body is
 * decoded here; anything else, a malformed message included, goes to the reference, which
 * raises the ProtocolError that says where and why. batch_messages builds its MessageExt
 * objects as decode.c does (slots filled, no __init__) from an exact MessageExt base whose
 * properties are an exact dict; any other base goes to its reference.
 */
#include "speedups.h"

#include <string.h>

#define BATCH_HEAD 20

static int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* One message of a batch body: its flag, body and decoded properties. */
struct entry {
    int32_t flag;
    const unsigned char *body;
    Py_ssize_t body_len;
    PyObject *props; /* a new dict */
};

/* Parses the message at data[pos] into *e, its end in *next. 1 on success; 0 without an
   exception when it is malformed, -1 with one on a real error. */
static int
batch_entry(const unsigned char *data, Py_ssize_t n, Py_ssize_t pos, struct entry *e,
            Py_ssize_t *next)
{
    if (n - pos < BATCH_HEAD) {
        return 0;
    }
    int32_t total = be32(data + pos), body_len = be32(data + pos + 16);
    Py_ssize_t p = pos + BATCH_HEAD;
    if (body_len < 0 || body_len > n - p - 2) {
        return 0;
    }
    e->flag = be32(data + pos + 12);
    e->body = data + p;
    e->body_len = body_len;
    p += body_len;
    /* A signed 16-bit length, as the reference's ">h". */
    int16_t props_len = (int16_t)((uint16_t)data[p] << 8 | data[p + 1]);
    p += 2;
    if (props_len < 0 || props_len > n - p || total != p + props_len - pos) {
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data + p, props_len, "replace");
    if (text == NULL) {
        return -1;
    }
    e->props = pmq_decode_properties(NULL, &text, 1, NULL);
    Py_DECREF(text);
    if (e->props == NULL) {
        return -1;
    }
    *next = p + props_len;
    return 1;
}

/* One message's (flag, body, properties) at data[pos], its end in *next; NULL without an
   exception when it is malformed, NULL with one on a real error. */
static PyObject *
batch_item(const unsigned char *data, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *next)
{
    struct entry e;
    if (batch_entry(data, n, pos, &e, next) <= 0) {
        return NULL;
    }
    return Py_BuildValue("(iy#N)", e.flag, (const char *)e.body, e.body_len, e.props);
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

/* The fields put_again copies from the base (the rest are the entry's or the defaults). */
static const enum pmq_message_field COPIED[] = {
    F_TOPIC, F_QUEUE_ID, F_SYS_FLAG, F_BORN_TIMESTAMP, F_BORN_HOST, F_STORE_HOST,
    F_RECONSUME_TIMES,
};
/* The store fields put_again leaves at their defaults: 0 each, msg_id "". */
static const enum pmq_message_field ZEROED[] = {
    F_PREPARED_TRANSACTION_OFFSET, F_STORE_TIMESTAMP, F_QUEUE_OFFSET, F_PHY_OFFSET,
    F_STORE_SIZE, F_BODY_CRC,
};

/* The message of entry e over base (its properties merged over a copy of base_props); NULL
 * with an exception on failure. Takes e->props. */
static PyObject *
entry_message(PyTypeObject *type, PyObject *base, PyObject *base_props, struct entry *e)
{
    PyObject *props = PyDict_Copy(base_props);
    if (props == NULL || PyDict_Update(props, e->props) < 0) {
        Py_XDECREF(props);
        Py_DECREF(e->props);
        return NULL;
    }
    Py_DECREF(e->props);
    PyObject *msg = type->tp_alloc(type, 0);
    if (msg == NULL) {
        Py_DECREF(props);
        return NULL;
    }
    *pmq_message_slot(msg, F_PROPERTIES) = props;
    for (size_t k = 0; k < sizeof COPIED / sizeof COPIED[0]; k++) {
        /* Checked non-NULL by the caller; X for a slot deleted since by a key's __eq__. */
        PyObject *v = *pmq_message_slot(base, COPIED[k]);
        Py_XINCREF(v);
        *pmq_message_slot(msg, COPIED[k]) = v;
    }
    for (size_t k = 0; k < sizeof ZEROED / sizeof ZEROED[0]; k++) {
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL) {
            Py_DECREF(msg);
            return NULL;
        }
        *pmq_message_slot(msg, ZEROED[k]) = zero;
    }
    PyObject *body = PyBytes_FromStringAndSize((const char *)e->body, e->body_len);
    PyObject *flag = body ? PyLong_FromLong(e->flag) : NULL;
    PyObject *msg_id = flag ? PyUnicode_FromStringAndSize(NULL, 0) : NULL;
    if (msg_id == NULL) {
        Py_XDECREF(body);
        Py_XDECREF(flag);
        Py_DECREF(msg);
        return NULL;
    }
    *pmq_message_slot(msg, F_BODY) = body;
    *pmq_message_slot(msg, F_FLAG) = flag;
    *pmq_message_slot(msg, F_MSG_ID) = msg_id;
    return msg;
}

PyObject *
pmq_batch_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 2 || !PyBytes_CheckExact(args[1])) {
        return pmq_call_reference("batch_messages", args, nargs, kwnames);
    }
    PyTypeObject *type = pmq_message_type("batch_messages");
    if (type == NULL) {
        return NULL;
    }
    PyObject *base = args[0];
    if (!Py_IS_TYPE(base, type)) {
        return pmq_call_reference("batch_messages", args, nargs, kwnames);
    }
    for (size_t k = 0; k < sizeof COPIED / sizeof COPIED[0]; k++) {
        if (*pmq_message_slot(base, COPIED[k]) == NULL) {
            return pmq_call_reference("batch_messages", args, nargs, kwnames);
        }
    }
    PyObject *base_props = *pmq_message_slot(base, F_PROPERTIES);
    if (base_props == NULL || !PyDict_CheckExact(base_props)) {
        return pmq_call_reference("batch_messages", args, nargs, kwnames);
    }
    /* Held: nothing here runs Python code that could replace them, but a dict copy of a
     * dict of str subclasses could. */
    Py_INCREF(base_props);
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[1]), pos = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(base_props);
        return NULL;
    }
    while (pos < n) {
        struct entry e;
        Py_ssize_t next = pos;
        int ok = batch_entry(data, n, pos, &e, &next);
        PyObject *msg = ok > 0 ? entry_message(type, base, base_props, &e) : NULL;
        if (msg == NULL) {
            Py_DECREF(out);
            Py_DECREF(base_props);
            if (ok < 0 || PyErr_Occurred()) {
                return NULL;
            }
            return pmq_call_reference("batch_messages", args, nargs, kwnames);
        }
        int rc = PyList_Append(out, msg);
        Py_DECREF(msg);
        if (rc < 0) {
            Py_DECREF(out);
            Py_DECREF(base_props);
            return NULL;
        }
        pos = next;
    }
    Py_DECREF(base_props);
    return out;
}

/* encode_batch_body: the batch body of a list or tuple of messages. The fast path takes
 * messages whose body is exact bytes, whose flag is an int that fits 32 bits and whose
 * properties pmq_properties_text takes and fit a signed 16-bit length in UTF-8; anything else
 * (another iterable included: the reference must see all of it) goes to the reference, which
 * raises what struct.pack and str.encode raise. */
static PyObject *str_properties, *str_body, *str_flag;

struct encoded {
    PyObject *body;  /* new references, NULL until read */
    PyObject *props; /* the properties text */
    int32_t flag;
};

static void
release_encoded(struct encoded *parts, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(parts[i].body);
        Py_XDECREF(parts[i].props);
    }
    PyMem_Free(parts);
}

static inline void
store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Reads message m into *e and adds its encoded size to *total: 1, 0 to bail, -1 on error. */
static int
encode_entry(PyObject *m, struct encoded *e, Py_ssize_t *total)
{
    PyObject *body = PyObject_GetAttr(m, str_body);
    PyObject *flag = body != NULL ? PyObject_GetAttr(m, str_flag) : NULL;
    PyObject *props = flag != NULL ? PyObject_GetAttr(m, str_properties) : NULL;
    int got = 0;
    if (props == NULL) {
        PyErr_Clear(); /* no such attribute: the reference says so */
        goto done;
    }
    int64_t flag_value;
    if (!PyBytes_CheckExact(body) || pmq_int64_in(flag, INT32_MIN, INT32_MAX, &flag_value) < 0) {
        goto done;
    }
    e->props = pmq_properties_text(props);
    if (e->props == NULL) {
        got = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_ssize_t props_len;
    if (PyUnicode_AsUTF8AndSize(e->props, &props_len) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            got = -1;
            goto done;
        }
        PyErr_Clear(); /* a lone surrogate: the reference's str.encode refuses it */
        goto done;
    }
    Py_ssize_t size = BATCH_HEAD + PyBytes_GET_SIZE(body) + 2 + props_len;
    if (props_len > INT16_MAX || size > INT32_MAX || *total > PY_SSIZE_T_MAX - size) {
        goto done; /* struct.pack refuses the length */
    }
    *total += size;
    e->body = Py_NewRef(body);
    e->flag = (int32_t)flag_value;
    got = 1;
done:
    Py_XDECREF(body);
    Py_XDECREF(flag);
    Py_XDECREF(props);
    return got;
}

PyObject *
pmq_encode_batch_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    if (nargs != 1 || kwnames != NULL
        || !(PyList_CheckExact(args[0]) || PyTuple_CheckExact(args[0]))) {
        return pmq_call_reference("encode_batch_body", args, nargs, kwnames);
    }
    if (str_properties == NULL) {
        str_properties = PyUnicode_InternFromString("properties");
        str_body = PyUnicode_InternFromString("body");
        str_flag = PyUnicode_InternFromString("flag");
        if (str_properties == NULL || str_body == NULL || str_flag == NULL) {
            return NULL;
        }
    }
    /* A new reference: a list may not change under us while attributes are read. */
    PyObject *seq = PySequence_Tuple(args[0]);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(seq), total = 0;
    struct encoded *parts = PyMem_Calloc(count ? (size_t)count : 1, sizeof(struct encoded));
    if (parts == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    int got = 1;
    for (Py_ssize_t i = 0; i < count && got > 0; i++) {
        got = encode_entry(PyTuple_GET_ITEM(seq, i), &parts[i], &total);
    }
    PyObject *out = NULL;
    if (got > 0) {
        out = PyBytes_FromStringAndSize(NULL, total);
        if (out != NULL) {
            unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
            for (Py_ssize_t i = 0; i < count; i++) {
                Py_ssize_t body_len = PyBytes_GET_SIZE(parts[i].body), props_len;
                const char *props = PyUnicode_AsUTF8AndSize(parts[i].props, &props_len);
                store_be32(p, (uint32_t)(BATCH_HEAD + body_len + 2 + props_len));
                store_be32(p + 4, 0);
                store_be32(p + 8, 0);
                store_be32(p + 12, (uint32_t)parts[i].flag);
                store_be32(p + 16, (uint32_t)body_len);
                p += BATCH_HEAD;
                memcpy(p, PyBytes_AS_STRING(parts[i].body), (size_t)body_len);
                p += body_len;
                p[0] = (unsigned char)(props_len >> 8);
                p[1] = (unsigned char)props_len;
                p += 2;
                memcpy(p, props, (size_t)props_len);
                p += props_len;
            }
        }
    }
    release_encoded(parts, count);
    Py_DECREF(seq);
    if (got < 0) {
        return NULL;
    }
    if (got == 0) {
        return pmq_call_reference("encode_batch_body", args, nargs, kwnames);
    }
    return out;
}
