/* The read path: CommitLog records into MessageExt objects (decode_message), a whole
 * PULL_MESSAGE body in one call (decode_pull_body), and a record into a Spark reader's
 * columns (add_record). One parser of a record's layout serves the three. No I/O here.
 *
 * The fast path decodes what the hot path carries: a version 1 or 2 record with IPv4 hosts,
 * no CRC check asked for, a body left as stored. Everything else goes to the reference
 * registered under the function's name: input of another type, a record the fast path does
 * not cover (IPv6 hosts, a compressed body to inflate, check_crc) and every record that fails
 * a check. The fast path's checks are the reference's own, so any record the fast path takes
 * is one the reference decodes, and a bad one gets the reference's exception; every length is
 * checked against the bytes left before it is used, so no read leaves the buffer.
 *
 * MessageExt objects are built without running their dataclass __init__: allocated by their
 * type and their slots filled through the offsets of the slot descriptors, read once from the
 * class the reference builds (its module's global MessageExt). The class must have exactly the
 * slots listed in MESSAGE_FIELDS; if not, the extension refuses to run rather than build
 * incomplete objects.
 */
#include "speedups.h"

#include <stdint.h>
#include <string.h>

#define MAGIC_V1 0xDAA320A7u
#define MAGIC_V2 0xDAA320ABu
#define MIN_RECORD_SIZE 91
#define SYSFLAG_COMPRESSED 0x1
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOSTADDRESS_V6 0x20
/* IPv4 hosts: the body length field ends here. */
#define POS_BODY 88

static const char *const MESSAGE_FIELDS[F_COUNT] = {
    "topic", "body", "queue_id", "flag", "properties", "sys_flag", "born_timestamp",
    "born_host", "store_host", "reconsume_times", "prepared_transaction_offset",
    "store_timestamp", "queue_offset", "phy_offset", "store_size", "body_crc", "msg_id",
};

/* The MessageExt class and its slots' offsets; strong references for the process's life. */
static PyTypeObject *message_type;
static Py_ssize_t slot_offset[F_COUNT];
static PyObject *str_uniq_key, *str_retry_topic;

#define SLOT(obj, f) (*(PyObject **)((char *)(obj) + slot_offset[f]))

/* Binds the MessageExt class of the module of the reference registered as ref_name. */
static int
bind_message_type(const char *ref_name)
{
    if (message_type != NULL) {
        return 0;
    }
    PyObject *ref = PyDict_GetItemString(pmq_references(), ref_name);
    if (ref == NULL || !PyFunction_Check(ref)) {
        PyErr_Format(PyExc_RuntimeError,
                     "pocketmq._speedups: no reference implementation registered for %s",
                     ref_name);
        return -1;
    }
    PyObject *cls = PyDict_GetItemString(PyFunction_GetGlobals(ref), "MessageExt");
    if (cls == NULL || !PyType_Check(cls)) {
        PyErr_Format(PyExc_RuntimeError,
                     "pocketmq._speedups: %s's module has no MessageExt class", ref_name);
        return -1;
    }
    if (pmq_slot_offsets(cls, MESSAGE_FIELDS, F_COUNT, slot_offset) < 0) {
        return -1;
    }
    str_uniq_key = PyUnicode_InternFromString("UNIQ_KEY");
    str_retry_topic = PyUnicode_InternFromString("RETRY_TOPIC");
    if (str_uniq_key == NULL || str_retry_topic == NULL) {
        return -1;
    }
    Py_INCREF(cls);
    message_type = (PyTypeObject *)cls;
    return 0;
}

PyTypeObject *
pmq_message_type(const char *ref_name)
{
    return bind_message_type(ref_name) < 0 ? NULL : message_type;
}

PyObject **
pmq_message_slot(PyObject *msg, enum pmq_message_field f)
{
    return &SLOT(msg, f);
}

static inline uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4));
}

/* Property names, and their last short value, seen in earlier records of the same body. */
#define PROPERTY_CACHE 8
#define PROPERTY_RAW_MAX 40

struct property_seen {
    PyObject *name;
    Py_ssize_t name_len;
    unsigned char name_raw[PROPERTY_RAW_MAX];
    PyObject *value; /* NULL: the last value was too long to keep */
    Py_ssize_t value_len;
    unsigned char value_raw[PROPERTY_RAW_MAX];
};

/* A number field's last value: records of one batch share their size, timestamps and often
 * their body's CRC, so one int object serves them all instead of one each. */
struct number_seen {
    PyObject *value; /* NULL: none yet */
    int64_t raw;
};

enum repeated_number { N_STORE_SIZE, N_BORN_TIMESTAMP, N_STORE_TIMESTAMP, N_BODY_CRC, N_COUNT };

/* Values repeated across the records of one body: the topic, the numbers above, and the
 * properties' names and values (a producer's cluster, region and flags recur on every
 * record; its UNIQ_KEY does not). */
struct repeats {
    PyObject *topic;
    unsigned char topic_raw[64];
    Py_ssize_t topic_len;
    struct number_seen number[N_COUNT];
    int properties_seen;
    struct property_seen property[PROPERTY_CACHE];
};

static void
repeats_clear(struct repeats *r)
{
    Py_CLEAR(r->topic);
    for (int i = 0; i < N_COUNT; i++) {
        Py_CLEAR(r->number[i].value);
    }
    for (int i = 0; i < r->properties_seen; i++) {
        Py_CLEAR(r->property[i].name);
        Py_CLEAR(r->property[i].value);
    }
    r->properties_seen = 0;
}

/* The last born and store host decoded, kept from body to body: a consumer's pulls come
 * from one broker and mostly from few producers, and formatting the address costs more than
 * the rest of a record's fixed fields together. */
static PyObject *last_host[2];
static unsigned char last_host_raw[2][8];

/* A new reference to ("a.b.c.d", port) for the 8 bytes at raw. */
static PyObject *
ipv4_host(int which, const unsigned char *raw)
{
    if (last_host[which] == NULL || memcmp(last_host_raw[which], raw, 8) != 0) {
        PyObject *port = PyLong_FromUnsignedLong(be32(raw + 4));
        if (port == NULL) {
            return NULL;
        }
        PyObject *host = PyUnicode_FromFormat("%u.%u.%u.%u", raw[0], raw[1], raw[2], raw[3]);
        if (host == NULL) {
            Py_DECREF(port);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, host, port);
        Py_DECREF(host);
        Py_DECREF(port);
        if (pair == NULL) {
            return NULL;
        }
        Py_XSETREF(last_host[which], pair);
        memcpy(last_host_raw[which], raw, 8);
    }
    return Py_NewRef(last_host[which]);
}

/* A new reference to an int of value v, the previous record's when it had the same. */
static PyObject *
repeated_number(struct repeats *r, enum repeated_number which, int64_t v)
{
    struct number_seen *seen = &r->number[which];
    if (seen->value == NULL || seen->raw != v) {
        PyObject *value = PyLong_FromLongLong(v);
        if (value == NULL) {
            return NULL;
        }
        Py_XSETREF(seen->value, value);
        seen->raw = v;
    }
    return Py_NewRef(seen->value);
}

static PyObject *
topic_str(struct repeats *r, const unsigned char *raw, Py_ssize_t len)
{
    if (r->topic != NULL && r->topic_len == len && memcmp(r->topic_raw, raw, (size_t)len) == 0) {
        return Py_NewRef(r->topic);
    }
    PyObject *topic = PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
    if (topic == NULL) {
        return NULL;
    }
    if (len <= (Py_ssize_t)sizeof(r->topic_raw)) {
        Py_XSETREF(r->topic, Py_NewRef(topic));
        memcpy(r->topic_raw, raw, (size_t)len);
        r->topic_len = len;
    }
    return topic;
}

/* The offset message id: store host (8 bytes) and PHYSICALOFFSET (8), upper-case hex. */
static PyObject *
offset_msg_id(const unsigned char *store_host, const unsigned char *phy_offset)
{
    static const char hex[] = "0123456789ABCDEF";
    PyObject *id = PyUnicode_New(32, 127);
    if (id == NULL) {
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(id);
    for (int i = 0; i < 16; i++) {
        unsigned char b = i < 8 ? store_host[i] : phy_offset[i - 8];
        out[2 * i] = (Py_UCS1)hex[b >> 4];
        out[2 * i + 1] = (Py_UCS1)hex[b & 0xF];
    }
    return id;
}

/* A new reference to the UTF-8 text of raw[0..len), invalid bytes replaced. */
static PyObject *
utf8_text(const unsigned char *raw, Py_ssize_t len)
{
    return PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
}

/* One property into props, its name and value taken from r's cache when an earlier record
 * had the same bytes. Returns 0, or -1 with an exception set. */
static int
set_property(struct repeats *r, PyObject *props, const unsigned char *name_raw,
             Py_ssize_t name_len, const unsigned char *value_raw, Py_ssize_t value_len)
{
    struct property_seen *seen = NULL;
    for (int i = 0; i < r->properties_seen; i++) {
        struct property_seen *e = &r->property[i];
        if (e->name_len == name_len && memcmp(e->name_raw, name_raw, (size_t)name_len) == 0) {
            seen = e;
            break;
        }
    }
    if (seen == NULL && name_len <= PROPERTY_RAW_MAX && r->properties_seen < PROPERTY_CACHE) {
        PyObject *name = utf8_text(name_raw, name_len);
        if (name == NULL) {
            return -1;
        }
        seen = &r->property[r->properties_seen++];
        seen->name = name;
        seen->name_len = name_len;
        memcpy(seen->name_raw, name_raw, (size_t)name_len);
        seen->value = NULL;
    }
    if (seen == NULL) {
        PyObject *name = utf8_text(name_raw, name_len);
        if (name == NULL) {
            return -1;
        }
        PyObject *value = utf8_text(value_raw, value_len);
        if (value == NULL) {
            Py_DECREF(name);
            return -1;
        }
        int rc = PyDict_SetItem(props, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        return rc;
    }
    if (seen->value == NULL || seen->value_len != value_len
        || memcmp(seen->value_raw, value_raw, (size_t)value_len) != 0) {
        PyObject *value = utf8_text(value_raw, value_len);
        if (value == NULL) {
            return -1;
        }
        if (value_len > PROPERTY_RAW_MAX) {
            Py_CLEAR(seen->value);
            int rc = PyDict_SetItem(props, seen->name, value);
            Py_DECREF(value);
            return rc;
        }
        Py_XSETREF(seen->value, value);
        seen->value_len = value_len;
        memcpy(seen->value_raw, value_raw, (size_t)value_len);
    }
    return PyDict_SetItem(props, seen->name, seen->value);
}

/* The properties dict of raw[0..len), as decode_properties(raw.decode("utf-8", "replace"))
 * reads it. Split on the bytes: \x01 and \x02 are ASCII, never part of a UTF-8 sequence
 * nor produced by the replacement, and a sequence cut by either is replaced alike whether
 * the decoder meets the separator or the end of a piece, so decoding each piece gives the
 * same text as splitting the decoded whole. */
static PyObject *
decode_properties_raw(struct repeats *r, const unsigned char *raw, Py_ssize_t len)
{
    PyObject *props = PyDict_New();
    if (props == NULL) {
        return NULL;
    }
    const unsigned char *end = raw + len;
    for (const unsigned char *item = raw; item < end;) {
        const unsigned char *stop = memchr(item, 0x02, (size_t)(end - item));
        if (stop == NULL) {
            stop = end;
        }
        const unsigned char *sep = memchr(item, 0x01, (size_t)(stop - item));
        if (sep != NULL
            && set_property(r, props, item, sep - item, sep + 1, stop - sep - 1) < 0) {
            Py_DECREF(props);
            return NULL;
        }
        if (stop == end) {
            break;
        }
        item = stop + 1;
    }
    return props;
}

/* Replaces the slot with props[name] when that is present and true, as `props.get(name) or`
 * reads. Returns 0, or -1 with an exception set. */
static int
take_true_property(PyObject *msg, enum pmq_message_field f, PyObject *props, PyObject *name)
{
    PyObject *value = PyDict_GetItemWithError(props, name);
    if (value == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int truthy = PyObject_IsTrue(value);
    if (truthy > 0) {
        Py_XSETREF(SLOT(msg, f), Py_NewRef(value));
    }
    return truthy < 0 ? -1 : 0;
}

/* What a consumer sees: the UNIQ_KEY as the id, and the first topic of a retried message. */
static int
as_consumer_sees(PyObject *msg, int restore_retry_topic)
{
    PyObject *props = SLOT(msg, F_PROPERTIES);
    if (props == NULL || !PyDict_Check(props)) {
        return 0;
    }
    if (take_true_property(msg, F_MSG_ID, props, str_uniq_key) < 0) {
        return -1;
    }
    if (restore_retry_topic && take_true_property(msg, F_TOPIC, props, str_retry_topic) < 0) {
        return -1;
    }
    return 0;
}

/* A record with IPv4 hosts in rec[0..limit): where its variable parts lie. */
struct v4_record {
    int64_t total;
    int32_t sys_flag;
    const unsigned char *body, *topic, *props;
    int64_t body_len, topic_len, props_len;
};

/* Reads the record at rec into *out, each length checked against the bytes left before it is
 * used, as the references check them. Returns 1, or 0 when it is not a sound version 1 or 2
 * record with IPv4 hosts (the fast paths leave it to the reference). */
static int
parse_v4_record(const unsigned char *rec, Py_ssize_t limit, struct v4_record *out)
{
    if (limit < 8) {
        return 0;
    }
    int64_t total = (int32_t)be32(rec);
    uint32_t magic = be32(rec + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > limit) {
        return 0;
    }
    int32_t sys_flag = (int32_t)be32(rec + 36);
    if (sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOSTADDRESS_V6)) {
        return 0;
    }
    int64_t body_len = (int32_t)be32(rec + 84);
    int64_t p = POS_BODY;
    if (body_len < 0 || p + body_len > total) {
        return 0;
    }
    out->body = rec + p;
    p += body_len;
    int64_t topic_len;
    if (magic == MAGIC_V1) {
        if (p + 1 > total) {
            return 0;
        }
        topic_len = rec[p];
        p += 1;
    }
    else {
        if (p + 2 > total) {
            return 0;
        }
        topic_len = ((int64_t)rec[p] << 8) | rec[p + 1];
        p += 2;
    }
    if (p + topic_len + 2 > total) {
        return 0;
    }
    out->topic = rec + p;
    p += topic_len;
    int64_t props_len = (int16_t)(((unsigned)rec[p] << 8) | rec[p + 1]);
    p += 2;
    if (props_len < 0 || p + props_len != total) {
        return 0;
    }
    out->props = rec + p;
    out->total = total;
    out->sys_flag = sys_flag;
    out->body_len = body_len;
    out->topic_len = topic_len;
    out->props_len = props_len;
    return 1;
}

/* Whose view of a record decode_record builds: the store's, or a consumer's (as_consumer_sees,
 * of a message pulled from a normal or from a retry topic). */
enum record_view { VIEW_STORE, VIEW_CONSUMER, VIEW_CONSUMER_RETRY };

/* Decodes the record filling rec[0..limit) as `view` sees it. Returns a new MessageExt; or
 * NULL with an exception set; or NULL with none set when the record is off the fast path (the
 * caller asks the reference). */
static PyObject *
decode_record(struct repeats *r, const unsigned char *rec, Py_ssize_t limit, int inflate_body,
              enum record_view view)
{
    struct v4_record f;
    if (!parse_v4_record(rec, limit, &f) || (inflate_body && (f.sys_flag & SYSFLAG_COMPRESSED))) {
        return NULL;
    }
    int64_t total = f.total;
    int32_t sys_flag = f.sys_flag;
    PyObject *msg = message_type->tp_alloc(message_type, 0);
    if (msg == NULL) {
        return NULL;
    }
    /* Each slot owns what is stored in it; a failure leaves the rest NULL, which the
     * object's dealloc skips. */
#define SET(f, expr)                                                                       \
    do {                                                                                   \
        PyObject *value_ = (expr);                                                         \
        if (value_ == NULL) {                                                              \
            goto fail;                                                                     \
        }                                                                                  \
        SLOT(msg, f) = value_;                                                             \
    } while (0)
    SET(F_TOPIC, topic_str(r, f.topic, (Py_ssize_t)f.topic_len));
    SET(F_BODY, PyBytes_FromStringAndSize((const char *)f.body, (Py_ssize_t)f.body_len));
    SET(F_QUEUE_ID, PyLong_FromLong((int32_t)be32(rec + 12)));
    SET(F_FLAG, PyLong_FromLong((int32_t)be32(rec + 16)));
    SET(F_PROPERTIES, decode_properties_raw(r, f.props, (Py_ssize_t)f.props_len));
    SET(F_SYS_FLAG, PyLong_FromLong(sys_flag));
    SET(F_BORN_TIMESTAMP, repeated_number(r, N_BORN_TIMESTAMP, (int64_t)be64(rec + 40)));
    SET(F_BORN_HOST, ipv4_host(0, rec + 48));
    SET(F_STORE_HOST, ipv4_host(1, rec + 64));
    SET(F_RECONSUME_TIMES, PyLong_FromLong((int32_t)be32(rec + 72)));
    SET(F_PREPARED_TRANSACTION_OFFSET, PyLong_FromLongLong(be64(rec + 76)));
    SET(F_STORE_TIMESTAMP, repeated_number(r, N_STORE_TIMESTAMP, (int64_t)be64(rec + 56)));
    SET(F_QUEUE_OFFSET, PyLong_FromLongLong(be64(rec + 20)));
    SET(F_PHY_OFFSET, PyLong_FromLongLong(be64(rec + 28)));
    SET(F_STORE_SIZE, repeated_number(r, N_STORE_SIZE, total));
    SET(F_BODY_CRC, repeated_number(r, N_BODY_CRC, (int32_t)be32(rec + 8)));
    /* A consumer's id is the UNIQ_KEY when there is one: the offset id is built only
     * without it. */
    if (view != VIEW_STORE && as_consumer_sees(msg, view == VIEW_CONSUMER_RETRY) < 0) {
        goto fail;
    }
    if (SLOT(msg, F_MSG_ID) == NULL) {
        SET(F_MSG_ID, offset_msg_id(rec + 64, rec + 28));
    }
#undef SET
    return msg;
fail:
    Py_DECREF(msg);
    return NULL;
}

/* A readable buffer of plain bytes when obj is a type whose len() and slices count bytes as
 * the reference does: 1; 0 when it is not (no exception); -1 when MessageExt cannot be bound
 * (an exception set). */
static int
fast_buffer(PyObject *obj, Py_buffer *view)
{
    if (bind_message_type("decode_message") < 0) {
        return -1;
    }
    if (!PyBytes_CheckExact(obj) && !PyByteArray_CheckExact(obj)) {
        if (!PyMemoryView_Check(obj)) {
            return 0;
        }
        Py_buffer *mv = PyMemoryView_GET_BUFFER(obj);
        /* PyBUF_SIMPLE below refuses a view that is not contiguous. */
        if (mv->ndim != 1 || mv->itemsize != 1 || mv->format == NULL
            || strcmp(mv->format, "B") != 0) {
            return 0;
        }
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        /* A released memoryview: the reference raises its own error for it. */
        PyErr_Clear();
        return 0;
    }
    return 1;
}

PyObject *
pmq_decode_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
    (void)module;
    /* decode_message(buf, pos=0, check_crc=False, *, inflate_body=False) */
    PyObject *pos_obj = NULL, *crc_obj = Py_False, *inflate_obj = Py_False;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs > 3) {
        goto reference;
    }
    if (nargs >= 2) {
        pos_obj = args[1];
    }
    if (nargs == 3) {
        crc_obj = args[2];
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "inflate_body") == 0) {
            inflate_obj = args[nargs + i];
        }
        else if (nargs < 2 && PyUnicode_CompareWithASCIIString(name, "pos") == 0) {
            pos_obj = args[nargs + i];
        }
        else if (nargs < 3 && PyUnicode_CompareWithASCIIString(name, "check_crc") == 0) {
            crc_obj = args[nargs + i];
        }
        else {
            goto reference;
        }
    }
    if (crc_obj != Py_False || (inflate_obj != Py_False && inflate_obj != Py_True)) {
        goto reference;
    }
    Py_ssize_t pos = 0;
    if (pos_obj != NULL) {
        if (!PyLong_CheckExact(pos_obj)) {
            goto reference;
        }
        pos = PyLong_AsSsize_t(pos_obj);
        if (pos == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto reference;
        }
    }
    Py_buffer view;
    int got = fast_buffer(args[0], &view);
    if (got <= 0) {
        if (got < 0) {
            return NULL;
        }
        goto reference;
    }
    PyObject *msg = NULL;
    if (pos >= 0 && pos <= view.len) {
        struct repeats r = {0};
        msg = decode_record(&r, (const unsigned char *)view.buf + pos, view.len - pos,
                            inflate_obj == Py_True, VIEW_STORE);
        repeats_clear(&r);
    }
    PyBuffer_Release(&view);
    if (msg != NULL || PyErr_Occurred()) {
        return msg;
    }
reference:
    return pmq_call_reference("decode_message", args, nargs, kwnames);
}

/* The reference's decode_message(record, inflate_body=True) for one record of a body. */
static PyObject *
decode_by_reference(const unsigned char *rec, Py_ssize_t size)
{
    static PyObject *kwnames;
    if (kwnames == NULL) {
        kwnames = Py_BuildValue("(s)", "inflate_body");
        if (kwnames == NULL) {
            return NULL;
        }
    }
    PyObject *record = PyBytes_FromStringAndSize((const char *)rec, size);
    if (record == NULL) {
        return NULL;
    }
    PyObject *call_args[2] = {record, Py_True};
    PyObject *msg = pmq_call_reference("decode_message", call_args, 1, kwnames);
    Py_DECREF(record);
    if (msg != NULL && !Py_IS_TYPE(msg, message_type)) {
        Py_DECREF(msg);
        PyErr_SetString(PyExc_RuntimeError,
                        "pocketmq._speedups: decode_message's reference returned no MessageExt");
        return NULL;
    }
    return msg;
}

PyObject *
pmq_decode_pull_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 2 || (args[1] != Py_True && args[1] != Py_False)) {
        return pmq_call_reference("decode_pull_body", args, nargs, kwnames);
    }
    Py_buffer view;
    int got = fast_buffer(args[0], &view);
    if (got <= 0) {
        return got < 0 ? NULL : pmq_call_reference("decode_pull_body", args, nargs, kwnames);
    }
    int restore = args[1] == Py_True;
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len;
    struct repeats r = {0};
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        goto done;
    }
    for (Py_ssize_t pos = 0; pos < len;) {
        int64_t size = len - pos >= 4 ? (int32_t)be32(buf + pos) : -1;
        if (size <= 0 || size > len - pos) {
            /* The reference raises for this body, with its message. */
            Py_CLEAR(out);
            PyBuffer_Release(&view);
            repeats_clear(&r);
            return pmq_call_reference("decode_pull_body", args, nargs, kwnames);
        }
        PyObject *msg = decode_record(&r, buf + pos, (Py_ssize_t)size, 1,
                                      restore ? VIEW_CONSUMER_RETRY : VIEW_CONSUMER);
        int rc = 0;
        if (msg == NULL && !PyErr_Occurred()) {
            msg = decode_by_reference(buf + pos, (Py_ssize_t)size);
            rc = msg == NULL ? 0 : as_consumer_sees(msg, restore);
        }
        if (msg == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        if (rc == 0) {
            rc = PyList_Append(out, msg);
        }
        Py_DECREF(msg);
        if (rc < 0) {
            Py_CLEAR(out);
            goto done;
        }
        pos += (Py_ssize_t)size;
    }
done:
    PyBuffer_Release(&view);
    repeats_clear(&r);
    return out;
}

/* Names and values add_record reads across its calls: a reader's records come from few
 * producers and topics (one static set: the GIL is held throughout). */
static struct repeats row_repeats;
static PyObject *str_keys, *str_tags;

/* props[name] (a new reference) or None when absent; NULL with an exception set. */
static PyObject *
property_or_none(PyObject *props, PyObject *name)
{
    PyObject *value = PyDict_GetItemWithError(props, name);
    if (value == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    return Py_NewRef(value);
}

enum row_column {
    C_TOPIC, C_BROKER, C_QUEUE_ID, C_QUEUE_OFFSET, C_MSG_ID, C_KEYS, C_TAGS, C_BODY,
    C_PROPERTIES, C_BORN_TIMESTAMP, C_STORE_TIMESTAMP, C_RECONSUME_TIMES, C_PHY_OFFSET,
    C_SYS_FLAG, C_COUNT
};
#define READ_COLUMNS C_PHY_OFFSET

/* The row of the record at rec[0..limit) into values[0..count): new references. Returns 1,
 * 0 when the record is off the fast path (the reference decides: no exception set), or -1
 * with an exception set. */
static int
row_values(const unsigned char *rec, Py_ssize_t limit, PyObject *topic, PyObject *broker,
           int include_properties, PyObject **values, int64_t *size)
{
    struct v4_record f;
    if (!parse_v4_record(rec, limit, &f) || (f.sys_flag & SYSFLAG_COMPRESSED)) {
        return 0;
    }
    /* Timestamps in microseconds; one past int64 is the reference's (an int it appends,
     * which the batch's conversion then refuses). */
    int64_t born_us, store_us;
    if (__builtin_mul_overflow(be64(rec + 40), (int64_t)1000, &born_us)
        || __builtin_mul_overflow(be64(rec + 56), (int64_t)1000, &store_us)) {
        return 0;
    }
    struct repeats *r = &row_repeats;
    PyObject *props = f.props_len ? decode_properties_raw(r, f.props, (Py_ssize_t)f.props_len)
                                  : PyDict_New();
    if (props == NULL) {
        return -1;
    }
    int filled = 0;
#define PUT(expr)                                                                          \
    do {                                                                                   \
        if ((values[filled] = (expr)) == NULL) {                                           \
            goto fail;                                                                     \
        }                                                                                  \
        filled++;                                                                          \
    } while (0)
    PUT(topic != Py_None ? Py_NewRef(topic) : topic_str(r, f.topic, (Py_ssize_t)f.topic_len));
    PUT(Py_NewRef(broker));
    PUT(PyLong_FromLong((int32_t)be32(rec + 12)));
    PUT(PyLong_FromLongLong(be64(rec + 20)));
    {
        /* `props.get(UNIQ_KEY) or` the offset id */
        PyObject *uniq = PyDict_GetItemWithError(props, str_uniq_key);
        if (uniq == NULL && PyErr_Occurred()) {
            goto fail;
        }
        int truthy = uniq == NULL ? 0 : PyObject_IsTrue(uniq);
        if (truthy < 0) {
            goto fail;
        }
        PUT(truthy ? Py_NewRef(uniq) : offset_msg_id(rec + 64, rec + 28));
    }
    PUT(property_or_none(props, str_keys));
    PUT(property_or_none(props, str_tags));
    PUT(PyBytes_FromStringAndSize((const char *)f.body, (Py_ssize_t)f.body_len));
    /* The dict itself: Arrow converts it as the map it is, and a dict of str, unlike a list
     * of tuples, is nothing the garbage collector tracks. */
    PUT(Py_NewRef(include_properties ? props : Py_None));
    PUT(PyLong_FromLongLong(born_us));
    PUT(PyLong_FromLongLong(store_us));
    PUT(PyLong_FromLong((int32_t)be32(rec + 72)));
    PUT(PyLong_FromLongLong(be64(rec + 28)));
    PUT(PyLong_FromLong(f.sys_flag));
#undef PUT
    Py_DECREF(props);
    *size = f.total;
    return 1;
fail:
    Py_DECREF(props);
    for (int i = 0; i < filled; i++) {
        Py_DECREF(values[i]);
    }
    return -1;
}

PyObject *
pmq_add_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    /* add_record(columns, include_properties, store_columns, buf, pos, limit, topic, broker) */
    if (kwnames != NULL || nargs != 8) {
        goto reference;
    }
    PyObject *columns = args[0], *include = args[1], *store = args[2], *topic = args[6];
    PyObject *broker = args[7];
    if ((include != Py_True && include != Py_False) || (store != Py_True && store != Py_False)
        || (topic != Py_None && !PyUnicode_CheckExact(topic))
        || (broker != Py_None && !PyUnicode_CheckExact(broker))
        || !PyLong_CheckExact(args[4]) || !PyLong_CheckExact(args[5])) {
        goto reference;
    }
    Py_ssize_t count = store == Py_True ? C_COUNT : READ_COLUMNS;
    if (!PyList_CheckExact(columns) || PyList_GET_SIZE(columns) != count) {
        goto reference;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyList_CheckExact(PyList_GET_ITEM(columns, i))) {
            goto reference;
        }
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[4]), limit = PyLong_AsSsize_t(args[5]);
    if ((pos == -1 || limit == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        goto reference;
    }
    if (str_keys == NULL) {
        str_keys = PyUnicode_InternFromString("KEYS");
        str_tags = PyUnicode_InternFromString("TAGS");
        if (str_keys == NULL || str_tags == NULL) {
            return NULL;
        }
    }
    Py_buffer view;
    int got = fast_buffer(args[3], &view);
    if (got <= 0) {
        if (got < 0) {
            return NULL;
        }
        goto reference;
    }
    PyObject *values[C_COUNT];
    int64_t size = 0;
    int rc = 0;
    if (0 <= pos && pos <= limit && limit <= view.len) {
        rc = row_values((const unsigned char *)view.buf + pos, limit - pos, topic, broker,
                        include == Py_True, values, &size);
    }
    PyBuffer_Release(&view);
    if (rc < 0) {
        return NULL;
    }
    if (rc == 0) {
        goto reference;
    }
    PyObject *result = Py_BuildValue("(LOO)", (long long)size, values[C_PHY_OFFSET],
                                     values[C_QUEUE_OFFSET]);
    /* Every value is built: the appends fail only for want of memory. */
    for (Py_ssize_t i = 0; i < count && result != NULL; i++) {
        if (PyList_Append(PyList_GET_ITEM(columns, i), values[i]) < 0) {
            Py_CLEAR(result);
        }
    }
    for (int i = 0; i < C_COUNT; i++) {
        Py_DECREF(values[i]);
    }
    return result;
reference:
    return pmq_call_reference("add_record", args, nargs, kwnames);
}
