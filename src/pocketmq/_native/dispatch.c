/* A put's dispatch in C: its dispatch requests built in one call (dispatch_requests) and a
 * queue's run of consume-queue units written into the mapping in one call
 * (consume_queue_put_requests). No I/O here: reservation stays with the caller.
 *
 * dispatch_requests' reference is pocketmq/store/dispatch.py's dispatch_requests_py. The
 * fast path takes lists of exact ints beside exact MessageExt objects whose properties are an
 * exact dict; any other input, a topic whose tag field is a delivery time (the schedule and
 * timer topics) and a TAGS value that is not a str with a UTF-16 form go to the reference,
 * which then builds every request (and raises what it raises). Requests are built without
 * their dataclass __init__: allocated by their type, slots filled through the offsets of the
 * slot descriptors, read once from the class the reference builds.
 *
 * consume_queue_put_requests' reference is pocketmq/store/consume_queue.py's
 * consume_queue_put_requests_py: units written in order while each continues the queue and
 * fits below the reservation mark. A record whose fields are not the exact types the broker
 * builds (str, int), or whose values do not fit a unit, stops the call as the reference's
 * struct.error does; the caller's ConsumeQueue.put then handles it (and raises what it
 * raises).
 */
#include "speedups.h"

#include <limits.h>
#include <string.h>

#define CQ_UNIT_SIZE 20
/* SysFlag.TRANSACTION_ROLLBACK_TYPE: the transaction-type bits. */
#define TRANSACTION_MASK 0xC
#define TRANSACTION_COMMIT 0x8

enum req_field {
    R_TOPIC, R_QUEUE_ID, R_PHY_OFFSET, R_SIZE, R_TAGS_CODE, R_STORE_TIMESTAMP, R_QUEUE_OFFSET,
    R_KEYS, R_UNIQ_KEY, R_SYS_FLAG, R_COUNT
};

static const char *const REQUEST_FIELDS[R_COUNT] = {
    "topic", "queue_id", "phy_offset", "size", "tags_code", "store_timestamp", "queue_offset",
    "keys", "uniq_key", "sys_flag",
};

/* The DispatchRequest and MessageExt classes, the request slots' offsets, the topics left to
 * the reference, the property names: strong references for the process's life. */
static PyTypeObject *request_type, *message_type;
static Py_ssize_t slot_offset[R_COUNT];
static PyObject *schedule_topic, *timer_topic;
static PyObject *str_tags, *str_keys, *str_uniq_key, *str_topic, *str_queue_id,
    *str_properties, *str_sys_flag, *str_phy_offset, *str_size, *str_tags_code,
    *str_queue_offset;

#define REQ_SLOT(obj, f) (*(PyObject **)((char *)(obj) + slot_offset[f]))

int
pmq_dispatch_init(void)
{
    static const struct {
        PyObject **var;
        const char *text;
    } names[] = {
        {&str_tags, "TAGS"}, {&str_keys, "KEYS"}, {&str_uniq_key, "UNIQ_KEY"},
        {&str_topic, "topic"}, {&str_queue_id, "queue_id"}, {&str_properties, "properties"},
        {&str_sys_flag, "sys_flag"}, {&str_phy_offset, "phy_offset"}, {&str_size, "size"},
        {&str_tags_code, "tags_code"}, {&str_queue_offset, "queue_offset"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (*names[i].var == NULL
            && (*names[i].var = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return -1;
        }
    }
    return 0;
}

/* A new reference to a global of the reference's module, checked with `check`. */
static PyObject *
reference_global(PyObject *globals, const char *name, int (*check)(PyObject *))
{
    PyObject *v = PyDict_GetItemString(globals, name);
    if (v == NULL || !check(v)) {
        PyErr_Format(PyExc_RuntimeError,
                     "pocketmq._speedups: dispatch_requests' module has no %s of the expected "
                     "type",
                     name);
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

static int
is_type(PyObject *v)
{
    return PyType_Check(v);
}

static int
is_str(PyObject *v)
{
    return PyUnicode_CheckExact(v);
}

static int
bind_request_type(void)
{
    if (request_type != NULL) {
        return 0;
    }
    PyObject *ref = PyDict_GetItemString(pmq_references(), "dispatch_requests");
    if (ref == NULL || !PyFunction_Check(ref)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "pocketmq._speedups: no reference implementation registered for "
                        "dispatch_requests");
        return -1;
    }
    PyObject *globals = PyFunction_GetGlobals(ref);
    PyObject *cls = reference_global(globals, "DispatchRequest", is_type);
    if (cls == NULL) {
        return -1;
    }
    if (pmq_slot_offsets(cls, REQUEST_FIELDS, R_COUNT, slot_offset) < 0) {
        Py_DECREF(cls);
        return -1;
    }
    PyObject *msg_cls = reference_global(globals, "MessageExt", is_type);
    PyObject *schedule = msg_cls ? reference_global(globals, "SCHEDULE_TOPIC", is_str) : NULL;
    PyObject *timer = schedule ? reference_global(globals, "TIMER_TOPIC", is_str) : NULL;
    if (timer == NULL) {
        Py_XDECREF(schedule);
        Py_XDECREF(msg_cls);
        Py_DECREF(cls);
        return -1;
    }
    schedule_topic = schedule;
    timer_topic = timer;
    message_type = (PyTypeObject *)msg_cls;
    request_type = (PyTypeObject *)cls;
    return 0;
}

static int
str_equal(PyObject *a, PyObject *b)
{
    return a == b || PyUnicode_Compare(a, b) == 0;
}

/* A property of an exact dict (borrowed), Py_None when absent. */
static PyObject *
property(PyObject *props, PyObject *name)
{
    PyObject *v = PyDict_GetItemWithError(props, name);
    return v != NULL ? v : (PyErr_Occurred() ? NULL : Py_None);
}

/* The request of one message, or NULL: with an exception set on failure, without one for a
 * message off the fast path (the reference must run). */
static PyObject *
build_request(PyObject *msg, PyObject *size, PyObject *sys_flag, PyObject *queue_offset,
              int64_t phy, PyObject *store_ts)
{
    if (!Py_IS_TYPE(msg, message_type)) {
        return NULL;
    }
    PyObject *topic = PyObject_GetAttr(msg, str_topic);
    PyObject *queue_id = topic ? PyObject_GetAttr(msg, str_queue_id) : NULL;
    PyObject *props = queue_id ? PyObject_GetAttr(msg, str_properties) : NULL;
    PyObject *req = NULL, *tags = NULL, *keys = NULL, *uniq = NULL;
    if (props == NULL) {
        PyErr_Clear();
        goto done;
    }
    if (!PyUnicode_CheckExact(topic) || !PyDict_CheckExact(props)
        || str_equal(topic, schedule_topic) || str_equal(topic, timer_topic)) {
        goto done;
    }
    tags = property(props, str_tags);
    keys = tags ? property(props, str_keys) : NULL;
    uniq = keys ? property(props, str_uniq_key) : NULL;
    if (uniq == NULL) {
        goto done; /* an exception from a str subclass's key comparison */
    }
    uint32_t hash = 0;
    if (tags != Py_None) {
        if (!PyUnicode_CheckExact(tags) || PyUnicode_READY(tags) < 0
            || pmq_utf16_hash(tags, 0, &hash)) {
            PyErr_Clear();
            goto done;
        }
    }
    req = request_type->tp_alloc(request_type, 0);
    if (req == NULL) {
        goto done;
    }
    PyObject *phy_obj = PyLong_FromLongLong(phy);
    PyObject *tags_obj = phy_obj ? PyLong_FromLong((long)(int32_t)hash) : NULL;
    if (tags_obj == NULL) {
        Py_XDECREF(phy_obj);
        Py_CLEAR(req);
        goto done;
    }
    Py_INCREF(topic);
    REQ_SLOT(req, R_TOPIC) = topic;
    Py_INCREF(queue_id);
    REQ_SLOT(req, R_QUEUE_ID) = queue_id;
    REQ_SLOT(req, R_PHY_OFFSET) = phy_obj;
    Py_INCREF(size);
    REQ_SLOT(req, R_SIZE) = size;
    REQ_SLOT(req, R_TAGS_CODE) = tags_obj;
    Py_INCREF(store_ts);
    REQ_SLOT(req, R_STORE_TIMESTAMP) = store_ts;
    Py_INCREF(queue_offset);
    REQ_SLOT(req, R_QUEUE_OFFSET) = queue_offset;
    Py_INCREF(keys);
    REQ_SLOT(req, R_KEYS) = keys;
    Py_INCREF(uniq);
    REQ_SLOT(req, R_UNIQ_KEY) = uniq;
    Py_INCREF(sys_flag);
    REQ_SLOT(req, R_SYS_FLAG) = sys_flag;
done:
    Py_XDECREF(topic);
    Py_XDECREF(queue_id);
    Py_XDECREF(props);
    return req;
}

PyObject *
pmq_build_request(PyObject *msg, PyObject *size, PyObject *sys_flag, PyObject *queue_offset,
                  int64_t phy, PyObject *store_ts)
{
    if (bind_request_type() < 0) {
        return NULL;
    }
    return build_request(msg, size, sys_flag, queue_offset, phy, store_ts);
}

PyObject *
pmq_dispatch_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)module;
    int64_t phy;
    if (kwnames != NULL || nargs != 7 || !PyList_CheckExact(args[0])
        || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2])
        || !PyList_CheckExact(args[3]) || pmq_int64_in(args[4], LLONG_MIN, LLONG_MAX, &phy)
        || !PyLong_CheckExact(args[5])) {
        return pmq_call_reference("dispatch_requests", args, nargs, kwnames);
    }
    if (bind_request_type() < 0) {
        return NULL;
    }
    PyObject *msgs = args[0], *sizes = args[1], *flags = args[2], *offsets = args[3];
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    if (PyList_GET_SIZE(sizes) != n || PyList_GET_SIZE(flags) != n
        || PyList_GET_SIZE(offsets) != n) {
        return pmq_call_reference("dispatch_requests", args, nargs, kwnames);
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* Sizes re-checked each time: nothing here runs Python code, but stay defensive. */
        if (PyList_GET_SIZE(msgs) != n || PyList_GET_SIZE(sizes) != n
            || PyList_GET_SIZE(flags) != n || PyList_GET_SIZE(offsets) != n) {
            goto reference;
        }
        PyObject *size = PyList_GET_ITEM(sizes, i);
        int64_t size_value, next;
        if (pmq_int64_in(size, LLONG_MIN, LLONG_MAX, &size_value)
            || __builtin_add_overflow(phy, size_value, &next)) {
            goto reference;
        }
        PyObject *msg = PyList_GET_ITEM(msgs, i);
        Py_INCREF(msg);
        PyObject *req = build_request(msg, size, PyList_GET_ITEM(flags, i),
                                      PyList_GET_ITEM(offsets, i), phy, args[5]);
        Py_DECREF(msg);
        if (req == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            goto reference;
        }
        PyList_SET_ITEM(out, i, req);
        phy = next;
    }
    return out;
reference:
    Py_DECREF(out);
    return pmq_call_reference("dispatch_requests", args, nargs, kwnames);
}

static inline void
store_be(unsigned char *p, uint64_t v, int width)
{
    for (int k = width - 1; k >= 0; k--) {
        p[k] = (unsigned char)v;
        v >>= 8;
    }
}

/* Whether the record's unit is the queue's next one, at queue byte file_from + pos; 1 yes, 0
 * no (the call stops), -1 its transaction type keeps it out of consume queues. The type is
 * read first: the call stops only at a record that goes to a consume queue, as the
 * reference's does (its caller relies on it). */
static int
unit_fields(PyObject *r, PyObject *topic, int64_t queue_id, int64_t file_from, int64_t pos,
            int64_t *phy, int64_t *size, int64_t *tags)
{
    int64_t sys_flag, qid, qo, at;
    if (pmq_int_attr(r, str_sys_flag, LLONG_MIN, LLONG_MAX, &sys_flag)) {
        return 0;
    }
    int64_t kind = sys_flag & TRANSACTION_MASK;
    if (kind != 0 && kind != TRANSACTION_COMMIT) {
        return -1;
    }
    if (__builtin_add_overflow(file_from, pos, &at)) {
        return 0;
    }
    if (pmq_int_attr(r, str_queue_id, LLONG_MIN, LLONG_MAX, &qid) || qid != queue_id) {
        return 0;
    }
    PyObject *t = PyObject_GetAttr(r, str_topic);
    if (t == NULL) {
        PyErr_Clear();
        return 0;
    }
    int same = PyUnicode_CheckExact(t) && str_equal(t, topic);
    Py_DECREF(t);
    if (!same || pmq_int_attr(r, str_queue_offset, LLONG_MIN, LLONG_MAX, &qo)) {
        return 0;
    }
    int64_t unit_at;
    if (__builtin_mul_overflow(qo, CQ_UNIT_SIZE, &unit_at) || unit_at != at) {
        return 0;
    }
    if (pmq_int_attr(r, str_phy_offset, LLONG_MIN, LLONG_MAX, phy)
        || pmq_int_attr(r, str_size, INT32_MIN, INT32_MAX, size)
        || pmq_int_attr(r, str_tags_code, LLONG_MIN, LLONG_MAX, tags)) {
        return 0;
    }
    return 1;
}

PyObject *
pmq_consume_queue_put_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    (void)module;
    int64_t pos, limit, file_from, queue_id, start;
    if (kwnames != NULL || nargs != 8 || pmq_int64_in(args[1], 0, LLONG_MAX, &pos)
        || pmq_int64_in(args[2], LLONG_MIN, LLONG_MAX, &limit)
        || pmq_int64_in(args[3], LLONG_MIN, LLONG_MAX, &file_from)
        || !PyUnicode_CheckExact(args[4])
        || pmq_int64_in(args[5], LLONG_MIN, LLONG_MAX, &queue_id)
        || !PyList_CheckExact(args[6]) || pmq_int64_in(args[7], 0, PY_SSIZE_T_MAX, &start)) {
        return pmq_call_reference("consume_queue_put_requests", args, nargs, kwnames);
    }
    Py_buffer mm;
    if (PyObject_GetBuffer(args[0], &mm, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return pmq_call_reference("consume_queue_put_requests", args, nargs, kwnames);
    }
    PyObject *topic = args[4], *reqs = args[6];
    unsigned char *buf = mm.buf;
    int wrote = 0;
    int64_t last_phy = 0, last_size = 0;
    Py_ssize_t i = (Py_ssize_t)start;
    for (; i < PyList_GET_SIZE(reqs); i++) {
        int64_t phy, size, tags;
        PyObject *r = PyList_GET_ITEM(reqs, i);
        /* Held while its attributes are read: a property could shrink the list. */
        Py_INCREF(r);
        int fits = unit_fields(r, topic, queue_id, file_from, pos, &phy, &size, &tags);
        Py_DECREF(r);
        if (fits < 0) {
            continue;
        }
        int64_t end;
        if (!fits || __builtin_add_overflow(pos, CQ_UNIT_SIZE, &end) || end > limit
            || end > (int64_t)mm.len) {
            break;
        }
        unsigned char *unit = buf + pos;
        store_be(unit, (uint64_t)phy, 8);
        store_be(unit + 12, (uint64_t)tags, 8);
        /* The size last, in one store (aligned: units are 20 bytes from a page), after the
         * rest (release): recovery keeps units whose size is set (write_unit). */
        __atomic_store_n((uint32_t *)(unit + 8), __builtin_bswap32((uint32_t)size),
                         __ATOMIC_RELEASE);
        pos += CQ_UNIT_SIZE;
        last_phy = phy;
        last_size = size;
        wrote = 1;
    }
    PyBuffer_Release(&mm);
    PyObject *end_phy;
    if (!wrote) {
        end_phy = PyLong_FromLong(-1);
    }
    else {
        /* phy + size may pass int64: add as Python ints, as the reference does. */
        PyObject *a = PyLong_FromLongLong(last_phy);
        PyObject *b = a ? PyLong_FromLongLong(last_size) : NULL;
        end_phy = b ? PyNumber_Add(a, b) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    if (end_phy == NULL) {
        return NULL;
    }
    return Py_BuildValue("(nLN)", i, (long long)pos, end_phy);
}
