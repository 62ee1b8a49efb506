/* A single message's put in one call (put_one; its reference is pocketmq/store/put_one.py's
 * put_one_py): the record through put_record (records.c) and the consume-queue unit through
 * consume_queue_put_requests (dispatch.c), called directly, with the attribute updates
 * put_one_py's steps make (the segment's, ConsumeQueue.put_in_place's).
 *
 * Everything put_one reads of the segment and the queue is read and checked before the
 * record is written; anything off that path (another type, a missing attribute)
 * goes to the reference, which then does what it does. Past the write, only an error (out of
 * memory) stops the call, as it would the reference's.
 */
#include "speedups.h"

#include <limits.h>

#define CQ_UNIT_SIZE 20
#define TRANSACTION_MASK 0xC
#define TRANSACTION_COMMIT 0x8

static PyObject *str_mm, *str_wrote_position, *str_reserved, *str_file_size,
    *str_file_from_offset, *str_store_timestamp, *str_mfq, *str_files, *str_topic,
    *str_queue_id, *str_max_physic_offset, *str_size, *str_sys_flag;
/* put_one_py's module constants, read once from it. */
static int64_t pwrite_min = -1, end_blank;

int
pmq_put_one_init(void)
{
    static const struct {
        PyObject **var;
        const char *text;
    } names[] = {
        {&str_mm, "mm"}, {&str_wrote_position, "wrote_position"}, {&str_reserved, "reserved"},
        {&str_file_size, "file_size"}, {&str_file_from_offset, "file_from_offset"},
        {&str_store_timestamp, "store_timestamp"}, {&str_mfq, "mfq"}, {&str_files, "files"},
        {&str_topic, "topic"}, {&str_queue_id, "queue_id"},
        {&str_max_physic_offset, "max_physic_offset"}, {&str_size, "size"},
        {&str_sys_flag, "sys_flag"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (*names[i].var == NULL
            && (*names[i].var = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return -1;
        }
    }
    return 0;
}

/* PWRITE_MIN and END_FILE_MIN_BLANK_LENGTH from put_one_py's globals: 0, or -1 with an
 * exception set. */
static int
bind_constants(void)
{
    if (pwrite_min >= 0) {
        return 0;
    }
    PyObject *ref = PyDict_GetItemString(pmq_references(), "put_one");
    if (ref == NULL || !PyFunction_Check(ref)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "pocketmq._speedups: no reference implementation registered for put_one");
        return -1;
    }
    PyObject *globals = PyFunction_GetGlobals(ref);
    int64_t a, b;
    if (pmq_int64_in(PyDict_GetItemString(globals, "PWRITE_MIN"), 1, INT32_MAX, &a)
        || pmq_int64_in(PyDict_GetItemString(globals, "END_FILE_MIN_BLANK_LENGTH"), 0, INT32_MAX,
                        &b)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "pocketmq._speedups: put_one's module has no PWRITE_MIN or "
                        "END_FILE_MIN_BLANK_LENGTH int");
        return -1;
    }
    pwrite_min = a;
    end_blank = b;
    return 0;
}

/* A new reference to obj's attribute, or NULL with no exception left set. */
static PyObject *
attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
    }
    return v;
}

/* A new reference to the last item of obj.<name>, an exact non-empty list; NULL with no
 * exception left set when it is not one, and *empty = 1 when it is an empty list. */
static PyObject *
last_of(PyObject *obj, PyObject *name, int *empty)
{
    *empty = 0;
    PyObject *list = attr(obj, name);
    if (list == NULL) {
        return NULL;
    }
    PyObject *last = NULL;
    if (PyList_CheckExact(list)) {
        Py_ssize_t n = PyList_GET_SIZE(list);
        if (n > 0) {
            last = Py_NewRef(PyList_GET_ITEM(list, n - 1));
        }
        else {
            *empty = 1;
        }
    }
    Py_DECREF(list);
    return last;
}

/* What a mapped file's write needs: its mapping and positions (the segment's, a consume
 * queue file's). */
typedef struct {
    PyObject *obj, *mm;
    int64_t wrote, reserved, file_size, file_from;
} Mapped;

static void
mapped_clear(Mapped *m)
{
    Py_CLEAR(m->obj);
    Py_CLEAR(m->mm);
}

/* Reads m->obj's fields (m->obj set, a new reference): 1, or 0 when one is not there or not
 * an int (no exception left set). */
static int
mapped_read(Mapped *m)
{
    m->mm = attr(m->obj, str_mm);
    return m->mm != NULL
           && !pmq_int_attr(m->obj, str_wrote_position, 0, LLONG_MAX, &m->wrote)
           && !pmq_int_attr(m->obj, str_reserved, LLONG_MIN, LLONG_MAX, &m->reserved)
           && !pmq_int_attr(m->obj, str_file_size, 0, LLONG_MAX, &m->file_size)
           && !pmq_int_attr(m->obj, str_file_from_offset, 0, LLONG_MAX, &m->file_from);
}

static int
set_int(PyObject *obj, PyObject *name, int64_t value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) {
        return -1;
    }
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

/* ConsumeQueue.put_in_place of [req] on cq's last file (c): the queue offset past the unit,
 * -1 when it did not take it; -2 on an error. */
static int64_t
queue_put(PyObject *module, PyObject *cq, Mapped *c, PyObject *topic, PyObject *queue_id,
          PyObject *reqs)
{
    PyObject *pos = PyLong_FromLongLong(c->wrote), *limit = PyLong_FromLongLong(c->reserved),
             *from = PyLong_FromLongLong(c->file_from), *zero = PyLong_FromLong(0);
    PyObject *out = NULL;
    int64_t end = -2;
    if (pos != NULL && limit != NULL && from != NULL && zero != NULL) {
        PyObject *args[8] = {c->mm, pos, limit, from, topic, queue_id, reqs, zero};
        out = pmq_consume_queue_put_requests(module, args, 8, NULL);
    }
    Py_XDECREF(pos);
    Py_XDECREF(limit);
    Py_XDECREF(from);
    Py_XDECREF(zero);
    if (out == NULL) {
        return -2;
    }
    int64_t new_pos, end_phy;
    if (!PyTuple_CheckExact(out) || PyTuple_GET_SIZE(out) != 3
        || pmq_int64_in(PyTuple_GET_ITEM(out, 1), 0, LLONG_MAX, &new_pos)
        || set_int(c->obj, str_wrote_position, new_pos) < 0) {
        goto done;
    }
    PyObject *end_obj = PyTuple_GET_ITEM(out, 2);
    if (pmq_int64_in(end_obj, LLONG_MIN, LLONG_MAX, &end_phy) == 0 && end_phy < 0) {
        end = -1;
        goto done;
    }
    /* end_phy may pass int64 (the reference adds Python ints): set the object itself. */
    if (PyObject_SetAttr(cq, str_max_physic_offset, end_obj) < 0) {
        goto done;
    }
    int64_t at;
    if (__builtin_add_overflow(c->file_from, new_pos, &at)) {
        PyErr_SetString(PyExc_OverflowError, "put_one: a consume queue offset past int64");
        goto done;
    }
    end = at / CQ_UNIT_SIZE;
done:
    if (end == -2 && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "put_one: unexpected consume_queue_put_requests result");
    }
    Py_DECREF(out);
    return end;
}

PyObject *
pmq_put_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs != 5 || !PyTuple_CheckExact(args[2])
        || PyTuple_GET_SIZE(args[2]) != 6 || !PyLong_CheckExact(args[4])) {
        return pmq_call_reference("put_one", args, nargs, kwnames);
    }
    if (bind_constants() < 0) {
        return NULL;
    }
    PyObject *msg = args[0], *put_args = args[2], *cq = args[3], *store_ts = args[4];
    Mapped seg = {.obj = Py_NewRef(args[1])}, cqf = {.obj = NULL};
    PyObject *cq_topic = NULL, *cq_queue_id = NULL, *req = NULL, *reqs = NULL, *result = NULL;
    int fallback = 1, cq_empty = 1;
    if (!mapped_read(&seg)) {
        goto done;
    }
    /* The consume queue's last file, read before anything is written. */
    if (cq != Py_None) {
        PyObject *mfq = attr(cq, str_mfq);
        if (mfq == NULL) {
            goto done;
        }
        cqf.obj = last_of(mfq, str_files, &cq_empty);
        Py_DECREF(mfq);
        if (cqf.obj == NULL && !cq_empty) {
            goto done;
        }
        if (cqf.obj != NULL
            && (!mapped_read(&cqf) || (cq_topic = attr(cq, str_topic)) == NULL
                || (cq_queue_id = attr(cq, str_queue_id)) == NULL)) {
            goto done;
        }
    }
    /* put_one_py's limit (one_put_limit) and the record's place. */
    int64_t pos = seg.wrote, limit = seg.reserved, phy;
    if (seg.file_size - end_blank < limit) {
        limit = seg.file_size - end_blank;
    }
    if (pos <= LLONG_MAX - pwrite_min && pos + pwrite_min - 1 < limit) {
        limit = pos + pwrite_min - 1;
    }
    if (__builtin_add_overflow(seg.file_from, pos, &phy)) {
        goto done;
    }
    fallback = 0;
    PyObject *pos_obj = PyLong_FromLongLong(pos), *limit_obj = PyLong_FromLongLong(limit),
             *phy_obj = PyLong_FromLongLong(phy);
    if (pos_obj != NULL && limit_obj != NULL && phy_obj != NULL) {
        PyObject *record_args[12] = {
            seg.mm, pos_obj, limit_obj, msg, PyTuple_GET_ITEM(put_args, 0),
            PyTuple_GET_ITEM(put_args, 1), PyTuple_GET_ITEM(put_args, 2),
            PyTuple_GET_ITEM(put_args, 3), phy_obj, store_ts, PyTuple_GET_ITEM(put_args, 4),
            PyTuple_GET_ITEM(put_args, 5),
        };
        req = pmq_put_record(module, record_args, 12, NULL);
    }
    Py_XDECREF(pos_obj);
    Py_XDECREF(limit_obj);
    Py_XDECREF(phy_obj);
    if (req == NULL || req == Py_None) {
        result = req;
        req = NULL;
        goto done;
    }
    int64_t size, sys_flag;
    if (pmq_int_attr(req, str_size, 0, LLONG_MAX - pos, &size)
        || pmq_int_attr(req, str_sys_flag, LLONG_MIN, LLONG_MAX, &sys_flag)) {
        PyErr_SetString(PyExc_SystemError, "put_one: unexpected put_record result");
        goto done;
    }
    if (set_int(seg.obj, str_wrote_position, pos + size) < 0
        || PyObject_SetAttr(seg.obj, str_store_timestamp, store_ts) < 0) {
        goto done;
    }
    if ((reqs = PyList_New(1)) == NULL) {
        goto done;
    }
    PyList_SET_ITEM(reqs, 0, Py_NewRef(req));
    int64_t queue_end = 0;
    int kind = (int)(sys_flag & TRANSACTION_MASK);
    if (kind == 0 || kind == TRANSACTION_COMMIT) {
        queue_end = cqf.obj == NULL ? -1 : queue_put(module, cq, &cqf, cq_topic, cq_queue_id, reqs);
        if (queue_end == -2) {
            goto done;
        }
    }
    result = Py_BuildValue("(OL)", req, (long long)queue_end);
done:
    mapped_clear(&seg);
    mapped_clear(&cqf);
    Py_XDECREF(cq_topic);
    Py_XDECREF(cq_queue_id);
    Py_XDECREF(req);
    Py_XDECREF(reqs);
    if (fallback) {
        return pmq_call_reference("put_one", args, nargs, kwnames);
    }
    return result;
}
