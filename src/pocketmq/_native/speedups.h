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
#include <stdint.h>

/* Big-endian signed integers at p, as Java's DataInput reads them (index files, consume
 * queues). */
static inline int32_t
load_be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8)
                     | (uint32_t)p[3]);
}

static inline int64_t
load_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return (int64_t)v;
}

/* MessageExt's fields, in the order of its dataclass (decode.c checks the class). */
enum pmq_message_field {
    F_TOPIC, F_BODY, F_QUEUE_ID, F_FLAG, F_PROPERTIES, F_SYS_FLAG, F_BORN_TIMESTAMP,
    F_BORN_HOST, F_STORE_HOST, F_RECONSUME_TIMES, F_PREPARED_TRANSACTION_OFFSET,
    F_STORE_TIMESTAMP, F_QUEUE_OFFSET, F_PHY_OFFSET, F_STORE_SIZE, F_BODY_CRC, F_MSG_ID,
    F_COUNT
};

/* The MessageExt class of the module of the reference registered as ref_name (bound once,
 * its slots checked; a borrowed reference), or NULL with an exception set. */
PyTypeObject *pmq_message_type(const char *ref_name);

/* Field f's slot of a MessageExt of that class: it owns what is stored in it (NULL: empty). */
PyObject **pmq_message_slot(PyObject *msg, enum pmq_message_field f);

/* The registry of references (borrowed; it lives as long as the process). */
PyObject *pmq_references(void);

/* An exact int in [lo, hi] into *out: 0, or -1 when it is not one (no exception left set). */
int pmq_int64_in(PyObject *v, int64_t lo, int64_t hi, int64_t *out);

/* pmq_int64_in of obj's attribute name: 0, or -1 (no exception left set). */
int pmq_int_attr(PyObject *obj, PyObject *name, int64_t lo, int64_t hi, int64_t *out);

/* The offsets of a slots dataclass's fields, checked to be exactly `names` (count of them) and
 * writable object slots: 0, or -1 with a RuntimeError saying to rebuild. */
int pmq_slot_offsets(PyObject *cls, const char *const *names, int count, Py_ssize_t *offsets);

/* Calls the reference implementation registered as `name` with the same arguments. */
PyObject *pmq_call_reference(const char *name, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);

/* The properties text of an exact dict of exact str (a new str), or NULL: with an exception
 * set on failure, without one for input off that fast path (the reference must run). */
PyObject *pmq_properties_text(PyObject *props);

/* Continues Java's String.hashCode h over the UTF-16 code units of a ready exact str s into
 * *out. Returns 0, or 1 when s holds a lone surrogate (no UTF-16 form). */
int pmq_utf16_hash(PyObject *s, uint32_t h, uint32_t *out);

/* Called once from PyInit__speedups: index.c's interned attribute names and page size. */
int pmq_index_init(void);

/* Called once from PyInit__speedups: dispatch.c's interned names. */
int pmq_dispatch_init(void);

/* Called once from PyInit__speedups: sendheader.c's interned names. */
int pmq_send_header_init(void);

/* The DispatchRequest of one message whose record was placed at phy (dispatch.c), or NULL:
 * with an exception set on failure, without one for a message off dispatch_requests' fast
 * path (a schedule or timer topic, a TAGS value without a UTF-16 form, another type). */
PyObject *pmq_build_request(PyObject *msg, PyObject *size, PyObject *sys_flag,
                            PyObject *queue_offset, int64_t phy, PyObject *store_ts);

/* CRC32 (zlib's) of n bytes. */
uint32_t pmq_crc32(const unsigned char *p, Py_ssize_t n);

/* Called once from pmq_records_init: the CRC tables and the CPU's carry-less multiply. */
void pmq_crc32_init(void);

/* Called once from PyInit__speedups: the interned attribute names and the CRC tables. */
int pmq_records_init(void);

/* Called once from PyInit__speedups: pull.c's interned attribute names. */
int pmq_pull_init(void);

/* Called once from PyInit__speedups: putone.c's interned attribute names. */
int pmq_put_one_init(void);

PyObject *pmq_java_string_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *pmq_java_string_hash_concat(PyObject *module, PyObject *const *args,
                                      Py_ssize_t nargs, PyObject *kwnames);
PyObject *pmq_encode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_decode_properties(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *pmq_put_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames);
PyObject *pmq_put_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *pmq_place_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames);
PyObject *pmq_decode_batch_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_decode_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames);
PyObject *pmq_decode_pull_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *pmq_add_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *pmq_hold_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames);
PyObject *pmq_release_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *pmq_index_put_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames);
PyObject *pmq_batch_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *pmq_dispatch_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_consume_queue_put_requests(PyObject *module, PyObject *const *args,
                                         Py_ssize_t nargs, PyObject *kwnames);
PyObject *pmq_offset_msg_ids_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);
PyObject *pmq_encode_batch_body(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_send_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
PyObject *pmq_decode_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames);
PyObject *pmq_next_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *pmq_encode_frame_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *pmq_pull_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames);

#endif
