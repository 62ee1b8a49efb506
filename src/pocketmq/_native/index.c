/* index_put_requests: a put's index entries written into an index file's mapping in one call.
 * No I/O here: the writes go to a buffer the caller maps; reservation stays with the caller.
 *
 * The reference is pocketmq/store/index_insert.py (layout in store/index_file.py): records are
 * inserted in order, each whole or not at all, until one needs the caller (a slot page or an
 * entry range not reserved, a full file, a record seen again); its position is returned. A
 * record whose fields are not the exact types the broker builds (str, int, None), an int past
 * 64 bits, a key with a lone surrogate or more than MAX_KEYS keys is also returned to the
 * caller, whose pure-Python build_index then handles it (and raises what it raises).
 */
#include "speedups.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#define HEADER_SIZE 40
#define SLOT_SIZE 4
#define ENTRY_SIZE 20
#define MAX_KEYS 64
#define ROLLBACK_MASK 0xC

static PyObject *str_topic, *str_phy_offset, *str_store_timestamp, *str_sys_flag,
    *str_uniq_key, *str_keys;
/* store/reserve.py's RESERVE_ALIGN: max(mmap.PAGESIZE, 4096). */
static long reserve_align;

int
pmq_index_init(void)
{
    if (str_topic == NULL) {
        str_topic = PyUnicode_InternFromString("topic");
        str_phy_offset = PyUnicode_InternFromString("phy_offset");
        str_store_timestamp = PyUnicode_InternFromString("store_timestamp");
        str_sys_flag = PyUnicode_InternFromString("sys_flag");
        str_uniq_key = PyUnicode_InternFromString("uniq_key");
        str_keys = PyUnicode_InternFromString("keys");
        if (str_topic == NULL || str_phy_offset == NULL || str_store_timestamp == NULL
            || str_sys_flag == NULL || str_uniq_key == NULL || str_keys == NULL) {
            return -1;
        }
    }
    long page = sysconf(_SC_PAGESIZE);
    reserve_align = page > 4096 ? page : 4096;
    return 0;
}

static inline void
store_be32(unsigned char *p, int32_t value)
{
    uint32_t v = (uint32_t)value;
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
store_be64(unsigned char *p, int64_t value)
{
    uint64_t v = (uint64_t)value;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

/* Header fields and slots (aligned: the mapping starts on a page) are each written with one
 * store, so that a kill leaves them old or new, never a mix (see write_slot in the reference);
 * release order keeps an entry's bytes ahead of the slot and the header that commit it. */
static inline void
store_field32(unsigned char *p, int32_t value)
{
    __atomic_store_n((uint32_t *)p, __builtin_bswap32((uint32_t)value), __ATOMIC_RELEASE);
}

static inline void
store_field64(unsigned char *p, int64_t value)
{
    __atomic_store_n((uint64_t *)p, __builtin_bswap64((uint64_t)value), __ATOMIC_RELEASE);
}

typedef struct {
    int64_t begin_ts, end_ts, begin_phy, end_phy;
    int32_t slot_count, count;
} Header;

static void
write_header(unsigned char *mm, const Header *h)
{
    store_field64(mm, h->begin_ts);
    store_field64(mm + 8, h->end_ts);
    store_field64(mm + 16, h->begin_phy);
    store_field64(mm + 24, h->end_phy);
    store_field32(mm + 32, h->slot_count);
    store_field32(mm + 36, h->count);
}

/* A new reference to an exact str attribute (or None when allow_none), else NULL, no
 * exception set. */
static PyObject *
str_attr(PyObject *obj, PyObject *name, int allow_none)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if ((allow_none && v == Py_None) || (PyUnicode_CheckExact(v) && PyUnicode_READY(v) == 0)) {
        return v;
    }
    PyErr_Clear();
    Py_DECREF(v);
    return NULL;
}

/* Java's Math.abs-based index hash of hashCode(topic#key), h being the hash so far. */
static inline int32_t
index_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (s < 0 ? -s : s);
}

/* Appends the hashes of the ' '-separated non-empty words of s, each continuing prefix.
 * Returns 0, or -1 for a lone surrogate or too many keys. */
static int
word_hashes(PyObject *s, uint32_t prefix, int32_t *out, int *n)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t h = prefix;
    int in_word = 0;
    for (Py_ssize_t i = 0; i <= len; i++) {
        Py_UCS4 c = i < len ? PyUnicode_READ(kind, data, i) : ' ';
        if (c == ' ') {
            if (in_word) {
                if (*n >= MAX_KEYS) {
                    return -1;
                }
                out[(*n)++] = index_hash(h);
            }
            h = prefix;
            in_word = 0;
            continue;
        }
        in_word = 1;
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31u * h + (0xD800u + (c >> 10));
            h = 31u * h + (0xDC00u + (c & 0x3FFu));
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            return -1;
        } else {
            h = 31u * h + c;
        }
    }
    return 0;
}

/* The index hashes of a record's keys: UNIQ_KEY first, then the KEYS words. */
static int
record_hashes(PyObject *r, int32_t *out, int *n)
{
    PyObject *topic = str_attr(r, str_topic, 0);
    if (topic == NULL) {
        return -1;
    }
    uint32_t prefix;
    int bad = pmq_utf16_hash(topic, 0, &prefix);
    Py_DECREF(topic);
    if (bad) {
        return -1;
    }
    prefix = 31u * prefix + '#';
    *n = 0;
    PyObject *uniq = str_attr(r, str_uniq_key, 1);
    if (uniq == NULL) {
        return -1;
    }
    if (uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0) {
        uint32_t h;
        bad = pmq_utf16_hash(uniq, prefix, &h);
        if (!bad) {
            out[(*n)++] = index_hash(h);
        }
    }
    Py_DECREF(uniq);
    if (bad) {
        return -1;
    }
    PyObject *keys = str_attr(r, str_keys, 1);
    if (keys == NULL) {
        return -1;
    }
    bad = keys != Py_None && word_hashes(keys, prefix, out, n);
    Py_DECREF(keys);
    return bad ? -1 : 0;
}

PyObject *
pmq_index_put_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    (void)module;
    int64_t reserved, slot_num, index_num, start;
    if (kwnames != NULL || nargs != 7 || pmq_int64_in(args[2], LLONG_MIN, LLONG_MAX, &reserved)
        || pmq_int64_in(args[3], 1, INT32_MAX, &slot_num)
        || pmq_int64_in(args[4], 1, INT32_MAX, &index_num) || !PyList_CheckExact(args[5])
        || pmq_int64_in(args[6], 0, PY_SSIZE_T_MAX, &start)) {
        return pmq_call_reference("index_put_requests", args, nargs, kwnames);
    }
    Py_buffer mm, pages;
    if (PyObject_GetBuffer(args[0], &mm, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return pmq_call_reference("index_put_requests", args, nargs, kwnames);
    }
    if (PyObject_GetBuffer(args[1], &pages, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&mm);
        return pmq_call_reference("index_put_requests", args, nargs, kwnames);
    }
    const int64_t entries_start = HEADER_SIZE + slot_num * SLOT_SIZE;
    if (entries_start + index_num * ENTRY_SIZE > (int64_t)mm.len) {
        PyBuffer_Release(&pages);
        PyBuffer_Release(&mm);
        return pmq_call_reference("index_put_requests", args, nargs, kwnames);
    }
    unsigned char *buf = mm.buf;
    const unsigned char *page_flags = pages.buf;
    Header h = {load_be64(buf), load_be64(buf + 8), load_be64(buf + 16), load_be64(buf + 24),
                load_be32(buf + 32), load_be32(buf + 36)};
    if (h.count < 1) {
        h.count = 1;
    }
    PyObject *reqs = args[5];
    Py_ssize_t i = (Py_ssize_t)start;
    int32_t hashes[MAX_KEYS];
    for (; i < PyList_GET_SIZE(reqs) && h.count < index_num; i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        int64_t phy, ts, sys_flag;
        /* Held while its attributes are read: a property could shrink the list. */
        Py_INCREF(r);
        int off_path = pmq_int_attr(r, str_phy_offset, LLONG_MIN, LLONG_MAX, &phy)
                       || pmq_int_attr(r, str_sys_flag, LLONG_MIN, LLONG_MAX, &sys_flag);
        if (off_path) {
            Py_DECREF(r);
            break;
        }
        if (phy <= h.end_phy) {
            Py_DECREF(r);
            if (phy == h.end_phy) {
                break;
            }
            continue;
        }
        if ((sys_flag & ROLLBACK_MASK) == ROLLBACK_MASK) {
            Py_DECREF(r);
            h.end_phy = phy;
            store_field64(buf + 24, phy);
            continue;
        }
        int n;
        off_path = pmq_int_attr(r, str_store_timestamp, LLONG_MIN, LLONG_MAX, &ts)
                   || record_hashes(r, hashes, &n);
        Py_DECREF(r);
        if (off_path) {
            break;
        }
        /* The list may have changed under attribute lookups of a subclass; re-check. */
        if ((int64_t)h.count + n > index_num || (int64_t)h.slot_count + n > INT32_MAX
            || entries_start + ((int64_t)h.count + n) * ENTRY_SIZE > reserved) {
            break;
        }
        int pages_ok = 1;
        for (int k = 0; k < n; k++) {
            int64_t page = (HEADER_SIZE + (hashes[k] % slot_num) * SLOT_SIZE) / reserve_align;
            if (page >= (int64_t)pages.len || !page_flags[page]) {
                pages_ok = 0;
                break;
            }
        }
        if (!pages_ok) {
            break;
        }
        for (int k = 0; k < n; k++) {
            unsigned char *slot = buf + HEADER_SIZE + (hashes[k] % slot_num) * SLOT_SIZE;
            int32_t prev = load_be32(slot);
            if (prev <= 0 || prev >= h.count) {
                prev = 0;
            }
            int64_t diff = 0, delta;
            if (h.begin_ts > 0 && !__builtin_sub_overflow(ts, h.begin_ts, &delta) && delta > 0) {
                diff = delta / 1000;
                if (diff > INT32_MAX) {
                    diff = INT32_MAX;
                }
            }
            unsigned char *entry = buf + entries_start + (int64_t)h.count * ENTRY_SIZE;
            store_be32(entry, hashes[k]);
            store_be64(entry + 4, phy);
            store_be32(entry + 12, (int32_t)diff);
            store_be32(entry + 16, prev);
            store_field32(slot, h.count);
            if (h.count <= 1) {
                h.begin_phy = phy;
                h.begin_ts = ts;
            }
            if (prev == 0) {
                h.slot_count++;
            }
            h.count++;
            h.end_phy = phy;
            h.end_ts = ts;
            write_header(buf, &h);
        }
        if (h.end_phy != phy) {
            h.end_phy = phy;
            store_field64(buf + 24, phy);
        }
    }
    PyBuffer_Release(&pages);
    PyBuffer_Release(&mm);
    return PyLong_FromSsize_t(i);
}
