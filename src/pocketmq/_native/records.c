/* A put's CommitLog records: encode_records and place_records (pocketmq.protocol.record_codec),
 * with the body CRC (crc32.c). No I/O here.
 *
 * Both functions first check everything they read and fall back to the reference, with no
 * side effect, on anything off their fast path: an argument of another type, a born host not
 * yet in the cache, a message the reference refuses (too large, bad Unicode, a field out of
 * range). The reference then raises the error, or does the unusual thing, so both sides fail
 * alike. Only what passed the checks is written, and place_records writes nothing outside
 * [pos, pos + len(data)) of the buffer it was handed.
 */
#include "speedups.h"

#include <string.h>

#define MAGIC_V1 0xDAA320A7u
#define MAGIC_V2 0xDAA320ABu
#define BORNHOST_V6 0x10
#define STOREHOSTADDRESS_V6 0x20
#define MAX_PROPERTIES_LENGTH 32767
#define MAX_TOPIC_LENGTH_V1 127
#define MAX_TOPIC_LENGTH 32767
#define POS_QUEUE_OFFSET 20
#define POS_SYS_FLAG 36
#define POS_BORN_HOST 48
/* TOTALSIZE .. BORNTIMESTAMP, STORETIMESTAMP, RECONSUMETIMES, PREPARED OFFSET, BODY LENGTH:
   the fixed fields around the two hosts. */
#define FIXED_FIELDS (48 + 8 + 4 + 8 + 4)
/* The shortest record place_records reads: up to an IPv4 born host and the store timestamp. */
#define MIN_PLACED (POS_BORN_HOST + 8 + 8)

/* --- big-endian writes and reads ---------------------------------------------------------- */

static unsigned char *
put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static unsigned char *
put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    return put32(p + 4, (uint32_t)v);
}

static int32_t
get32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* --- attribute names ------------------------------------------------------------------------ */

enum {
    A_BODY, A_PROPERTIES, A_TOPIC, A_BORN_HOST, A_SYS_FLAG, A_QUEUE_ID, A_FLAG,
    A_BORN_TIMESTAMP, A_RECONSUME_TIMES, A_PREPARED, A_COUNT
};
static const char *const attr_names[A_COUNT] = {
    "body", "properties", "topic", "born_host", "sys_flag", "queue_id", "flag",
    "born_timestamp", "reconsume_times", "prepared_transaction_offset",
};
/* Interned for the life of the process, like the module. */
static PyObject *attrs[A_COUNT];
/* The same, as MessageExt's slots: read straight from an exact MessageExt. */
static const enum pmq_message_field attr_fields[A_COUNT] = {
    F_BODY, F_PROPERTIES, F_TOPIC, F_BORN_HOST, F_SYS_FLAG, F_QUEUE_ID, F_FLAG,
    F_BORN_TIMESTAMP, F_RECONSUME_TIMES, F_PREPARED_TRANSACTION_OFFSET,
};

int
pmq_records_init(void)
{
    pmq_crc32_init();
    for (int i = 0; i < A_COUNT; i++) {
        if (attrs[i] == NULL && (attrs[i] = PyUnicode_InternFromString(attr_names[i])) == NULL) {
            return -1;
        }
    }
    return 0;
}

/* --- encode_records -------------------------------------------------------------------- */

/* One message checked and measured; the objects are strong references. */
typedef struct {
    PyObject *body;  /* exact bytes */
    PyObject *topic; /* exact str, its UTF-8 cached in it */
    PyObject *born;  /* exact bytes of 8 or 20 */
    const char *topic_utf8;
    Py_ssize_t props_at; /* the properties' UTF-8 in the call's Scratch */
    Py_ssize_t topic_len, props_len, size;
    int32_t queue_id, flag, sys_flag, reconsume_times;
    uint64_t born_timestamp;
    int64_t prepared;
} Encoding;

static void
encoding_clear(Encoding *e)
{
    Py_CLEAR(e->body);
    Py_CLEAR(e->topic);
    Py_CLEAR(e->born);
}

/* An exact int in [lo, hi] into *out: 1, or 0 when it is off the fast path (any error
   cleared: the reference reports it). */
static int
long_in(PyObject *v, long long lo, long long hi, long long *out)
{
    if (v == NULL || !PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < lo || x > hi) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* The UTF-8 properties of a call's messages, back to back (PyMem). */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Scratch;

/* Appends n bytes to s: 0, or -1 with MemoryError. */
static int
scratch_put(Scratch *s, const char *p, Py_ssize_t n)
{
    if (n == 0) { /* an empty name or value: s->buf may still be NULL */
        return 0;
    }
    if (n > s->cap - s->len) {
        Py_ssize_t cap = s->cap ? s->cap : 4096;
        while (n > cap - s->len) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        char *buf = PyMem_Realloc(s->buf, (size_t)cap);
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->buf = buf;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, (size_t)n);
    s->len += n;
    return 0;
}

/* The UTF-8 of encode_properties(props) appended to s, as ``name \x01 value \x02`` per item
   (the UTF-8 of the text is the UTF-8 of its parts): 1; 0 for props off the fast path (not an
   exact dict of exact str, a str with no UTF-8, over MAX_PROPERTIES_LENGTH: the reference
   says which), -1 on a real error. No Python code runs here. */
static int
properties_utf8(Scratch *s, PyObject *props, Py_ssize_t *len)
{
    if (!PyDict_CheckExact(props)) {
        return 0;
    }
    Py_ssize_t start = s->len, pos = 0;
    PyObject *item[2];
    static const char SEPARATORS[2] = {0x01, 0x02};
    while (PyDict_Next(props, &pos, &item[0], &item[1])) {
        for (int k = 0; k < 2; k++) {
            Py_ssize_t n;
            const char *utf8;
            if (!PyUnicode_CheckExact(item[k])
                || (utf8 = PyUnicode_AsUTF8AndSize(item[k], &n)) == NULL) {
                PyErr_Clear();
                return 0;
            }
            if (scratch_put(s, utf8, n) < 0 || scratch_put(s, &SEPARATORS[k], 1) < 0) {
                return -1;
            }
        }
        if (s->len - start > MAX_PROPERTIES_LENGTH) {
            return 0;
        }
    }
    *len = s->len - start;
    return 1;
}

/* Steals nothing; returns 1 with *e filled (strong references), or 0 when msg is off the fast
   path (e holds what it took so far, for encoding_clear), or -1 on a real error. An exact
   MessageExt (of type) is read from its slots, anything else through its attributes. */
static int
encoding_check(Encoding *e, PyObject *msg, PyTypeObject *type, PyObject *hosts, Scratch *props,
               Py_ssize_t max_body, Py_ssize_t max_record, Py_ssize_t store_len)
{
    PyObject *v[A_COUNT] = {NULL};
    int ok = 0;
    int exact = Py_IS_TYPE(msg, type);
    for (int i = 0; i < A_COUNT; i++) {
        v[i] = exact ? Py_XNewRef(*pmq_message_slot(msg, attr_fields[i]))
                     : PyObject_GetAttr(msg, attrs[i]);
        if (v[i] == NULL) {
            PyErr_Clear();
            goto done;
        }
    }
    if (!PyBytes_CheckExact(v[A_BODY]) || PyBytes_GET_SIZE(v[A_BODY]) > max_body
        || !PyUnicode_CheckExact(v[A_TOPIC])) {
        goto done;
    }
    e->body = Py_NewRef(v[A_BODY]);
    e->props_at = props->len;
    ok = properties_utf8(props, v[A_PROPERTIES], &e->props_len);
    if (ok <= 0) {
        goto done;
    }
    ok = 0;
    e->topic = Py_NewRef(v[A_TOPIC]);
    e->topic_utf8 = PyUnicode_AsUTF8AndSize(e->topic, &e->topic_len);
    if (e->topic_utf8 == NULL || e->topic_len == 0 || e->topic_len > MAX_TOPIC_LENGTH) {
        PyErr_Clear();
        goto done;
    }
    PyObject *born = PyDict_GetItemWithError(hosts, v[A_BORN_HOST]);
    if (born == NULL || !PyBytes_CheckExact(born)
        || (PyBytes_GET_SIZE(born) != 8 && PyBytes_GET_SIZE(born) != 20)) {
        PyErr_Clear();
        goto done;
    }
    e->born = Py_NewRef(born);
    long long queue_id, flag, sys_flag, reconsume, prepared;
    if (!long_in(v[A_QUEUE_ID], INT32_MIN, INT32_MAX, &queue_id)
        || !long_in(v[A_FLAG], INT32_MIN, INT32_MAX, &flag)
        || !long_in(v[A_SYS_FLAG], LLONG_MIN, LLONG_MAX, &sys_flag)
        || !long_in(v[A_RECONSUME_TIMES], INT32_MIN, INT32_MAX, &reconsume)
        || !long_in(v[A_PREPARED], LLONG_MIN, LLONG_MAX, &prepared)
        || !PyLong_CheckExact(v[A_BORN_TIMESTAMP])) {
        goto done;
    }
    /* The IPv6 bits are the hosts' to set; the rest must fit the signed 32-bit field. */
    sys_flag &= ~(long long)(BORNHOST_V6 | STOREHOSTADDRESS_V6);
    if (sys_flag < INT32_MIN || sys_flag > INT32_MAX) {
        goto done;
    }
    unsigned long long born_ts = PyLong_AsUnsignedLongLong(v[A_BORN_TIMESTAMP]);
    if (born_ts == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        goto done;
    }
    Py_ssize_t born_len = PyBytes_GET_SIZE(born);
    e->queue_id = (int32_t)queue_id;
    e->flag = (int32_t)flag;
    e->sys_flag = (int32_t)sys_flag | (born_len == 20 ? BORNHOST_V6 : 0)
                  | (store_len == 20 ? STOREHOSTADDRESS_V6 : 0);
    e->reconsume_times = (int32_t)reconsume;
    e->prepared = (int64_t)prepared;
    e->born_timestamp = (uint64_t)born_ts;
    /* No overflow: the body is at most max_body, the other parts are a few KiB at most. */
    e->size = FIXED_FIELDS + born_len + store_len + PyBytes_GET_SIZE(e->body)
              + (e->topic_len <= MAX_TOPIC_LENGTH_V1 ? 1 : 2) + e->topic_len + 2 + e->props_len;
    ok = e->size <= max_record && e->size <= INT32_MAX;
done:
    for (int i = 0; i < A_COUNT; i++) {
        Py_XDECREF(v[i]);
    }
    return ok;
}

static unsigned char *
encoding_write(const Encoding *e, unsigned char *p, const char *store_host, Py_ssize_t store_len,
               const char *props)
{
    const unsigned char *body = (const unsigned char *)PyBytes_AS_STRING(e->body);
    Py_ssize_t body_len = PyBytes_GET_SIZE(e->body), born_len = PyBytes_GET_SIZE(e->born);
    int v1 = e->topic_len <= MAX_TOPIC_LENGTH_V1;
    p = put32(p, (uint32_t)e->size);
    p = put32(p, v1 ? MAGIC_V1 : MAGIC_V2);
    p = put32(p, pmq_crc32(body, body_len) & 0x7FFFFFFFu);
    p = put32(p, (uint32_t)e->queue_id);
    p = put32(p, (uint32_t)e->flag);
    p = put64(p, 0); /* QUEUEOFFSET, PHYSICALOFFSET: place_records' */
    p = put64(p, 0);
    p = put32(p, (uint32_t)e->sys_flag);
    p = put64(p, e->born_timestamp);
    memcpy(p, PyBytes_AS_STRING(e->born), (size_t)born_len);
    p += born_len;
    p = put64(p, 0); /* STORETIMESTAMP: place_records' */
    memcpy(p, store_host, (size_t)store_len);
    p += store_len;
    p = put32(p, (uint32_t)e->reconsume_times);
    p = put64(p, (uint64_t)e->prepared);
    p = put32(p, (uint32_t)body_len);
    memcpy(p, body, (size_t)body_len);
    p += body_len;
    if (v1) {
        *p++ = (unsigned char)e->topic_len;
    } else {
        *p++ = (unsigned char)(e->topic_len >> 8);
        *p++ = (unsigned char)e->topic_len;
    }
    memcpy(p, e->topic_utf8, (size_t)e->topic_len);
    p += e->topic_len;
    *p++ = (unsigned char)(e->props_len >> 8);
    *p++ = (unsigned char)e->props_len;
    if (e->props_len > 0) { /* props is NULL while every message's properties are empty */
        memcpy(p, props + e->props_at, (size_t)e->props_len);
    }
    return p + e->props_len;
}

PyObject *
pmq_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 5 || !PyList_CheckExact(args[0])
        || !PyBytes_CheckExact(args[1]) || !PyDict_CheckExact(args[2])
        || !PyLong_CheckExact(args[3]) || !PyLong_CheckExact(args[4])) {
        return pmq_call_reference("encode_records", args, nargs, kwnames);
    }
    Py_ssize_t store_len = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t max_body = PyLong_AsSsize_t(args[3]), max_record = PyLong_AsSsize_t(args[4]);
    if ((max_body == -1 || max_record == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        return pmq_call_reference("encode_records", args, nargs, kwnames);
    }
    if (store_len != 8 && store_len != 20) {
        return pmq_call_reference("encode_records", args, nargs, kwnames);
    }
    PyTypeObject *type = pmq_message_type("encode_records");
    if (type == NULL) {
        return NULL;
    }
    /* A tuple copy: attribute lookups could, in principle, run code that changes the list.
     * The properties are copied out as UTF-8 for the same reason. */
    PyObject *msgs = PyList_AsTuple(args[0]);
    if (msgs == NULL) {
        return NULL;
    }
    Scratch props = {NULL, 0, 0};
    Py_ssize_t n = PyTuple_GET_SIZE(msgs), total = 0, i;
    Encoding *enc = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Encoding));
    PyObject *data = NULL, *sizes = NULL, *flags = NULL, *result = NULL;
    int fallback = 0;
    if (enc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        int ok = encoding_check(&enc[i], PyTuple_GET_ITEM(msgs, i), type, args[2], &props,
                                max_body, max_record, store_len);
        if (ok < 0) {
            goto done;
        }
        if (ok == 0 || enc[i].size > PY_SSIZE_T_MAX - total) {
            fallback = 1;
            goto done;
        }
        total += enc[i].size;
    }
    data = PyBytes_FromStringAndSize(NULL, total);
    sizes = PyList_New(n);
    flags = PyList_New(n);
    if (data == NULL || sizes == NULL || flags == NULL) {
        goto done;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(data);
    const char *store_host = PyBytes_AS_STRING(args[1]);
    for (i = 0; i < n; i++) {
        PyObject *size = PyLong_FromSsize_t(enc[i].size);
        if (size == NULL) {
            goto done;
        }
        PyList_SET_ITEM(sizes, i, size);
        PyObject *flag = PyLong_FromLong(enc[i].sys_flag);
        if (flag == NULL) {
            goto done;
        }
        PyList_SET_ITEM(flags, i, flag);
        p = encoding_write(&enc[i], p, store_host, store_len, props.buf);
    }
    result = PyTuple_Pack(3, data, sizes, flags);
done:
    if (enc != NULL) {
        for (i = 0; i < n; i++) {
            encoding_clear(&enc[i]);
        }
        PyMem_Free(enc);
    }
    PyMem_Free(props.buf);
    Py_DECREF(msgs);
    Py_XDECREF(data);
    Py_XDECREF(sizes);
    Py_XDECREF(flags);
    if (fallback) {
        return pmq_call_reference("encode_records", args, nargs, kwnames);
    }
    return result;
}

/* --- place_records --------------------------------------------------------------------- */

/* An exact int that fits a signed 64-bit field into *out: 1, or 0 (error cleared). */
static int
int64_of(PyObject *v, int64_t *out)
{
    long long x;
    if (!long_in(v, LLONG_MIN, LLONG_MAX, &x)) {
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

PyObject *
pmq_place_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    (void)module;
    int64_t pos, phy, store_ts;
    if (kwnames != NULL || nargs != 6 || !PyBytes_CheckExact(args[2])
        || !PyList_CheckExact(args[5]) || !int64_of(args[1], &pos) || !int64_of(args[3], &phy)
        || !int64_of(args[4], &store_ts)) {
        return pmq_call_reference("place_records", args, nargs, kwnames);
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[2]), count = PyList_GET_SIZE(args[5]);
    /* Copied first: nothing below may run Python code, but the list is the caller's. */
    int64_t *qos = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(int64_t));
    Py_ssize_t *starts = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *ts_pos = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(Py_ssize_t));
    Py_buffer view = {0};
    int have_view = 0, fallback = 1;
    PyObject *result = NULL;
    if (qos == NULL || starts == NULL || ts_pos == NULL) {
        PyErr_NoMemory();
        fallback = 0;
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!int64_of(PyList_GET_ITEM(args[5], i), &qos[i])) {
            goto done;
        }
    }
    /* The walk the reference makes: exactly `count` records, each long enough to hold the
       fields patched below. */
    Py_ssize_t p = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (n - p < MIN_PLACED) {
            goto done;
        }
        int32_t size = get32(data + p);
        Py_ssize_t born_len = (get32(data + p + POS_SYS_FLAG) & BORNHOST_V6) ? 20 : 8;
        if (size < POS_BORN_HOST + born_len + 8 || size > n - p) {
            goto done;
        }
        starts[i] = p;
        ts_pos[i] = POS_BORN_HOST + born_len;
        p += size;
    }
    if (p != n || count == 0 || phy > INT64_MAX - (int64_t)n) {
        goto done;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        goto done;
    }
    have_view = 1;
    /* The reference bounds the write by len(buf): the two must agree (a buffer of wider
       items, or a multi-dimensional one, is left to it). */
    Py_ssize_t length = PyObject_Length(args[0]);
    if (length < 0) {
        PyErr_Clear();
        goto done;
    }
    if (view.len != length || view.readonly || pos < 0 || pos > (int64_t)view.len
        || n > view.len - (Py_ssize_t)pos) {
        goto done;
    }
    fallback = 0;
    unsigned char *dst = (unsigned char *)view.buf + pos;
    memcpy(dst + 4, data + 4, (size_t)(n - 4));
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned char *rec = dst + starts[i];
        put64(rec + POS_QUEUE_OFFSET, (uint64_t)qos[i]);
        put64(rec + POS_QUEUE_OFFSET + 8, (uint64_t)(phy + (int64_t)starts[i]));
        put64(rec + ts_pos[i], (uint64_t)store_ts);
    }
    /* The first record's size last: see the reference. */
    memcpy(dst, data, 4);
    result = Py_NewRef(Py_None);
done:
    if (have_view) {
        PyBuffer_Release(&view);
    }
    PyMem_Free(qos);
    PyMem_Free(starts);
    PyMem_Free(ts_pos);
    if (fallback) {
        return pmq_call_reference("place_records", args, nargs, kwnames);
    }
    return result;
}

/* --- put_record ---------------------------------------------------------------------------- */

/* SysFlag.TRANSACTION_ROLLBACK_TYPE: the transaction-type bits; prepared and rolled-back
 * records take no queue offset. */
#define TRANSACTION_MASK 0xC
#define TRANSACTION_COMMIT 0x8

/* The next offset of the queue `key` in the exact dict `table` into *qo (0 when absent): 1, 0
 * when the value is not an exact int of int64 (no exception left set), -1 on an error. */
static int
queue_offset_of(PyObject *table, PyObject *key, int64_t *qo)
{
    PyObject *v = PyDict_GetItemWithError(table, key);
    if (v == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        *qo = 0;
        return 1;
    }
    return pmq_int64_in(v, LLONG_MIN, LLONG_MAX - 1, qo) == 0;
}

PyObject *
pmq_put_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    int64_t pos, limit, phy, store_ts;
    if (kwnames != NULL || nargs != 12 || pmq_int64_in(args[1], 0, LLONG_MAX, &pos)
        || pmq_int64_in(args[2], LLONG_MIN, LLONG_MAX, &limit) || !PyBytes_CheckExact(args[4])
        || !PyDict_CheckExact(args[5]) || !PyLong_CheckExact(args[6])
        || !PyLong_CheckExact(args[7]) || pmq_int64_in(args[8], 0, LLONG_MAX, &phy)
        || pmq_int64_in(args[9], LLONG_MIN, LLONG_MAX, &store_ts)
        || !PyDict_CheckExact(args[10])) {
        return pmq_call_reference("put_record", args, nargs, kwnames);
    }
    PyObject *msg = args[3], *table = args[10];
    Py_ssize_t store_len = PyBytes_GET_SIZE(args[4]);
    Py_ssize_t max_body = PyLong_AsSsize_t(args[6]), max_record = PyLong_AsSsize_t(args[7]);
    if ((max_body == -1 || max_record == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        return pmq_call_reference("put_record", args, nargs, kwnames);
    }
    PyTypeObject *type = pmq_message_type("put_record");
    if (type == NULL) {
        return NULL;
    }
    if ((store_len != 8 && store_len != 20) || !Py_IS_TYPE(msg, type)) {
        return pmq_call_reference("put_record", args, nargs, kwnames);
    }
    Scratch props = {NULL, 0, 0};
    Encoding e = {0};
    PyObject *key = NULL, *size = NULL, *flag = NULL, *qo_obj = NULL, *next_qo = NULL;
    PyObject *req = NULL, *result = NULL;
    unsigned char *record = NULL;
    Py_buffer view = {0};
    int have_view = 0, fallback = 1;
    int ok = encoding_check(&e, msg, type, args[5], &props, max_body, max_record, store_len);
    if (ok <= 0) {
        fallback = ok == 0;
        goto done;
    }
    /* The reference refuses nothing that passed the checks: its answer now is the fit. */
    if (limit < pos || e.size > limit - pos) {
        fallback = 0;
        result = Py_NewRef(Py_None);
        goto done;
    }
    int64_t qo = 0;
    int kind = e.sys_flag & TRANSACTION_MASK;
    if (kind == 0 || kind == TRANSACTION_COMMIT) {
        /* The slot again, as the reference reads it: encoding_check's host lookup hashed a
         * tuple, which in principle may run code. */
        PyObject *queue_id = *pmq_message_slot(msg, F_QUEUE_ID);
        if (queue_id == NULL || !PyLong_CheckExact(queue_id)) {
            goto done;
        }
        key = PyTuple_Pack(2, e.topic, queue_id);
        if (key == NULL) {
            fallback = 0;
            goto done;
        }
        ok = queue_offset_of(table, key, &qo);
        if (ok <= 0) {
            fallback = ok == 0;
            goto done;
        }
        if ((next_qo = PyLong_FromLongLong(qo + 1)) == NULL) {
            fallback = 0;
            goto done;
        }
    }
    size = PyLong_FromSsize_t(e.size);
    flag = size ? PyLong_FromLong(e.sys_flag) : NULL;
    qo_obj = flag ? PyLong_FromLongLong(qo) : NULL;
    if (qo_obj == NULL) {
        fallback = 0;
        goto done;
    }
    if (phy > INT64_MAX - (int64_t)e.size) {
        goto done;
    }
    req = pmq_build_request(msg, size, flag, qo_obj, phy, args[9]);
    if (req == NULL) {
        fallback = !PyErr_Occurred();
        goto done;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        goto done;
    }
    have_view = 1;
    /* As place_records: the reference bounds the write by len(buf). */
    Py_ssize_t length = PyObject_Length(args[0]);
    if (length < 0) {
        PyErr_Clear();
        goto done;
    }
    if (view.len != length || view.readonly || pos > (int64_t)view.len
        || e.size > view.len - (Py_ssize_t)pos) {
        goto done;
    }
    fallback = 0;
    record = PyMem_Malloc((size_t)e.size);
    if (record == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Nothing is written before the last step that can fail. */
    if (next_qo != NULL && PyDict_SetItem(table, key, next_qo) < 0) {
        goto done;
    }
    encoding_write(&e, record, PyBytes_AS_STRING(args[4]), store_len, props.buf);
    put64(record + POS_QUEUE_OFFSET, (uint64_t)qo);
    put64(record + POS_QUEUE_OFFSET + 8, (uint64_t)phy);
    put64(record + POS_BORN_HOST + PyBytes_GET_SIZE(e.born), (uint64_t)store_ts);
    unsigned char *dst = (unsigned char *)view.buf + pos;
    /* The size last, as place_records writes it. */
    memcpy(dst + 4, record + 4, (size_t)(e.size - 4));
    memcpy(dst, record, 4);
    result = Py_NewRef(req);
done:
    if (have_view) {
        PyBuffer_Release(&view);
    }
    PyMem_Free(record);
    PyMem_Free(props.buf);
    encoding_clear(&e);
    Py_XDECREF(key);
    Py_XDECREF(size);
    Py_XDECREF(flag);
    Py_XDECREF(qo_obj);
    Py_XDECREF(next_qo);
    Py_XDECREF(req);
    if (fallback) {
        return pmq_call_reference("put_record", args, nargs, kwnames);
    }
    return result;
}
