/* send_header: a send request's header fields in one call (pocketmq/protocol/send_header.py;
 * send_header_py is the reference). No I/O here.
 *
 * The fast path takes an exact dict, an exact bool and an exact int, and header values that are
 * exact str: numbers written as plain decimals ([-]digits, at most 18 of them) inside their
 * fields' domains, a topic of TopicValidator's characters and at most 127 of them, batch absent,
 * empty, "true" or "false". A V2 header (one-letter names) must not also carry a field under its
 * V1 name. Anything else goes to the reference, which then decides, and raises what it raises.
 * The default topic name is read from the reference's module (AUTO_CREATE_TOPIC_KEY) on first
 * use: the reference is registered after the module is imported.
 */
#include "speedups.h"

enum header_field {
    H_TOPIC, H_DEFAULT_TOPIC, H_DEFAULT_QUEUE_NUMS, H_QUEUE_ID, H_FLAG, H_PROPERTIES,
    H_SYS_FLAG, H_BORN_TIMESTAMP, H_RECONSUME_TIMES, H_MAX_RECONSUME_TIMES, H_BATCH, H_COUNT
};

/* The reference's tuple order; V1 names, then SendMessageRequestHeaderV2's letters. */
static const char *const V1_TEXT[H_COUNT] = {
    "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "flag", "properties",
    "sysFlag", "bornTimestamp", "reconsumeTimes", "maxReconsumeTimes", "batch",
};
static const char *const V2_TEXT[H_COUNT] = {"b", "c", "d", "e", "h", "i", "f", "g", "j", "l", "m"};

/* Interned names and the default topic name: strong references for the process's life. */
static PyObject *v1_name[H_COUNT], *v2_name[H_COUNT], *default_topic, *empty_str;

#define JAVA_INT_MIN (-2147483647LL - 1)
#define JAVA_INT_MAX 2147483647LL
/* protocol.fields: MAX_QUEUE_NUMS, MAX_TIMESTAMP_MS; protocol.names: TOPIC_MAX_LENGTH. */
#define MAX_QUEUE_NUMS 1024
#define MAX_TIMESTAMP_MS 253402300799999LL
#define TOPIC_MAX_LENGTH 127
#define ANY_QUEUE (-1)

int
pmq_send_header_init(void)
{
    for (int f = 0; f < H_COUNT; f++) {
        if (v1_name[f] == NULL && (v1_name[f] = PyUnicode_InternFromString(V1_TEXT[f])) == NULL) {
            return -1;
        }
        if (v2_name[f] == NULL && (v2_name[f] = PyUnicode_InternFromString(V2_TEXT[f])) == NULL) {
            return -1;
        }
    }
    if (empty_str == NULL && (empty_str = PyUnicode_New(0, 0)) == NULL) {
        return -1;
    }
    return 0;
}

/* AUTO_CREATE_TOPIC_KEY of the reference's module (borrowed), or NULL: off the fast path. */
static PyObject *
the_default_topic(void)
{
    if (default_topic != NULL) {
        return default_topic;
    }
    PyObject *ref = PyDict_GetItemString(pmq_references(), "send_header");
    if (ref == NULL || !PyFunction_Check(ref)) {
        return NULL;
    }
    PyObject *value = PyDict_GetItemString(PyFunction_GetGlobals(ref), "AUTO_CREATE_TOPIC_KEY");
    if (value == NULL || !PyUnicode_CheckExact(value)) {
        return NULL;
    }
    Py_INCREF(value);
    default_topic = value;
    return default_topic;
}

/* Field f's value (borrowed) into *out, NULL when absent: 0, or -1 off the fast path (a value
 * that is not an exact str, a V2 header naming the field twice). No exception left set. */
static int
lookup(PyObject *ext, int v2, int f, PyObject **out)
{
    PyObject *value = PyDict_GetItemWithError(ext, v2 ? v2_name[f] : v1_name[f]);
    if (value == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (v2) {
        PyObject *twice = PyDict_GetItemWithError(ext, v1_name[f]);
        if (twice != NULL || PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
    }
    if (value != NULL && !PyUnicode_CheckExact(value)) {
        return -1;
    }
    *out = value;
    return 0;
}

/* A plain decimal in [lo, hi] into *out, or `fallback` when the value is absent or empty (as
 * headers.get_int reads it): 0, or -1 off the fast path. */
static int
decimal(PyObject *value, int64_t fallback, int64_t lo, int64_t hi, int64_t *out)
{
    if (value == NULL || PyUnicode_GET_LENGTH(value) == 0) {
        *out = fallback;
        return fallback < lo || fallback > hi ? -1 : 0;
    }
    if (!PyUnicode_IS_ASCII(value)) {
        return -1;
    }
    const char *p = (const char *)PyUnicode_1BYTE_DATA(value);
    Py_ssize_t n = PyUnicode_GET_LENGTH(value), i = p[0] == '-';
    if (n - i < 1 || n - i > 18) {
        return -1;
    }
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    if (p[0] == '-') {
        v = -v;
    }
    if (v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Whether a topic is valid by TopicValidator's characters and the short length limit. */
static int
plain_topic(PyObject *topic)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(topic);
    if (!PyUnicode_IS_ASCII(topic) || n < 1 || n > TOPIC_MAX_LENGTH) {
        return 0;
    }
    const char *p = (const char *)PyUnicode_1BYTE_DATA(topic);
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || c == '%' || c == '|' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

PyObject *
pmq_send_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != 3 || !PyDict_CheckExact(args[0]) || !PyBool_Check(args[1])
        || !PyLong_CheckExact(args[2])) {
        return pmq_call_reference("send_header", args, nargs, kwnames);
    }
    PyObject *ext = args[0];
    int v2 = args[1] == Py_True;
    PyObject *value[H_COUNT];
    for (int f = 0; f < H_COUNT; f++) {
        if (lookup(ext, v2, f, &value[f]) < 0) {
            return pmq_call_reference("send_header", args, nargs, kwnames);
        }
    }
    int64_t default_queue_nums, num[H_COUNT] = {0};
    PyObject *topic = value[H_TOPIC], *fallback_topic = the_default_topic(), *batch;
    PyObject *batch_text = value[H_BATCH];
    if (batch_text == NULL || PyUnicode_GET_LENGTH(batch_text) == 0
        || PyUnicode_CompareWithASCIIString(batch_text, "false") == 0) {
        batch = Py_False;
    } else if (PyUnicode_CompareWithASCIIString(batch_text, "true") == 0) {
        batch = Py_True;
    } else {
        batch = NULL;
    }
    if (topic == NULL || !plain_topic(topic) || fallback_topic == NULL || batch == NULL
        || pmq_int64_in(args[2], JAVA_INT_MIN, JAVA_INT_MAX, &default_queue_nums) < 0
        || decimal(value[H_DEFAULT_QUEUE_NUMS], default_queue_nums, 1, MAX_QUEUE_NUMS,
                   &num[H_DEFAULT_QUEUE_NUMS]) < 0
        || decimal(value[H_QUEUE_ID], ANY_QUEUE, JAVA_INT_MIN, JAVA_INT_MAX, &num[H_QUEUE_ID]) < 0
        || decimal(value[H_FLAG], 0, JAVA_INT_MIN, JAVA_INT_MAX, &num[H_FLAG]) < 0
        || decimal(value[H_SYS_FLAG], 0, JAVA_INT_MIN, JAVA_INT_MAX, &num[H_SYS_FLAG]) < 0
        || decimal(value[H_BORN_TIMESTAMP], 0, 0, MAX_TIMESTAMP_MS, &num[H_BORN_TIMESTAMP]) < 0
        || decimal(value[H_RECONSUME_TIMES], 0, JAVA_INT_MIN, JAVA_INT_MAX,
                   &num[H_RECONSUME_TIMES]) < 0
        || decimal(value[H_MAX_RECONSUME_TIMES], -1, JAVA_INT_MIN, JAVA_INT_MAX,
                   &num[H_MAX_RECONSUME_TIMES]) < 0) {
        PyErr_Clear();
        return pmq_call_reference("send_header", args, nargs, kwnames);
    }
    if (num[H_QUEUE_ID] < 0) {
        num[H_QUEUE_ID] = ANY_QUEUE;  /* the broker picks (fields.check_queue_id's allow_any) */
    }
    PyObject *out = PyTuple_New(H_COUNT);
    if (out == NULL) {
        return NULL;
    }
    PyObject *text[H_COUNT] = {
        [H_TOPIC] = topic,
        [H_DEFAULT_TOPIC] = value[H_DEFAULT_TOPIC] ? value[H_DEFAULT_TOPIC] : fallback_topic,
        [H_PROPERTIES] = value[H_PROPERTIES] ? value[H_PROPERTIES] : empty_str,
        [H_BATCH] = batch,
    };
    for (int f = 0; f < H_COUNT; f++) {
        PyObject *item = text[f];
        if (item != NULL) {
            Py_INCREF(item);
        } else if ((item = PyLong_FromLongLong(num[f])) == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, f, item);
    }
    return out;
}
