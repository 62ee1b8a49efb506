/* pull_scan: the consume-queue walk of a pull, its records copied from the mapped CommitLog
 * into one body, in one call. No I/O here: it reads the mappings the caller's segments hold.
 *
 * The reference is pocketmq/store/pull_scan.py. This serves its tag-hash case; input off that
 * path (a record filter, segment lists that are not exact lists, an attribute or a limit that
 * is not an exact int in range, a tag code that is not an exact int, a mapping without a
 * buffer) goes to the reference, which gives it the reference's result or exception. The walk
 * has no side effect, so handing off half-way is as good as handing off at the start.
 *
 * While a mapping's buffer is held no Python code runs (segment attributes are slots of
 * MappedFile, read without calling out), so no other thread can close a segment under it.
 */
#include "speedups.h"

#include <string.h>

#define UNIT_SIZE 20
#define BLANK_UNIT_SIZE 0x7FFFFFFF
/* Positions and offsets the walk accepts from attributes: far from int64 overflow. */
#define POS_LIMIT ((int64_t)1 << 62)

static PyObject *str_file_from_offset, *str_wrote_position, *str_mm;

int
pmq_pull_init(void)
{
    if (str_file_from_offset == NULL) {
        str_file_from_offset = PyUnicode_InternFromString("file_from_offset");
        str_wrote_position = PyUnicode_InternFromString("wrote_position");
        str_mm = PyUnicode_InternFromString("mm");
        if (str_file_from_offset == NULL || str_wrote_position == NULL || str_mm == NULL) {
            return -1;
        }
    }
    return 0;
}

/* Outcome of a step: go on, or hand the whole call to the reference (no exception set). */
enum { OK = 0, OFF_PATH = -1 };

/* An exact int in [lo, hi). */
static int
as_int64(PyObject *v, int64_t lo, int64_t hi, int64_t *out)
{
    return pmq_int64_in(v, lo, hi - 1, out) < 0 ? OFF_PATH : OK;
}

static int
int_attr(PyObject *obj, PyObject *name, int64_t *out)
{
    return pmq_int_attr(obj, name, 0, POS_LIMIT - 1, out) < 0 ? OFF_PATH : OK;
}

/* A segment as the walk reads it; buf.obj is NULL until its mapping is held. */
typedef struct {
    PyObject *seg; /* borrowed from the list, which the call keeps alive */
    int64_t from, wrote;
    Py_buffer buf;
    int gone; /* the mapping raised ValueError: closed by retention */
} Seg;

static void
seg_release(Seg *s)
{
    if (s->buf.obj != NULL) {
        PyBuffer_Release(&s->buf);
        s->buf.obj = NULL;
    }
    s->seg = NULL;
}

/* MappedFileQueue.find: *found is 0 when no segment holds offset. */
static int
find(PyObject *files, int64_t file_size, int64_t offset, PyObject **found)
{
    *found = NULL;
    Py_ssize_t n = PyList_GET_SIZE(files);
    if (n == 0) {
        return OK;
    }
    int64_t from0;
    if (int_attr(PyList_GET_ITEM(files, 0), str_file_from_offset, &from0) != OK) {
        return OFF_PATH;
    }
    if (offset < from0) {
        return OK;
    }
    int64_t idx = (offset - from0) / file_size;
    if (idx < n) {
        *found = PyList_GET_ITEM(files, (Py_ssize_t)idx);
    }
    return OK;
}

/* Makes s the segment object seg: its offsets read, its mapping held (or marked gone). */
static int
seg_enter(Seg *s, PyObject *seg)
{
    seg_release(s);
    s->gone = 0;
    if (int_attr(seg, str_file_from_offset, &s->from) != OK
        || int_attr(seg, str_wrote_position, &s->wrote) != OK) {
        return OFF_PATH;
    }
    PyObject *mm = PyObject_GetAttr(seg, str_mm);
    if (mm == NULL) {
        PyErr_Clear();
        return OFF_PATH;
    }
    int rc = PyObject_GetBuffer(mm, &s->buf, PyBUF_SIMPLE);
    Py_DECREF(mm);
    if (rc < 0) {
        s->buf.obj = NULL;
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return OFF_PATH;
        }
        PyErr_Clear();
        s->gone = 1;
    }
    s->seg = seg;
    return OK;
}

typedef struct {
    PyObject *body; /* bytes, grown as records are added */
    Py_ssize_t len;
    int64_t *units;
    Py_ssize_t n_units, cap_units;
} Out;

static int
out_add(Out *o, const unsigned char *rec, int32_t size, int64_t qo)
{
    Py_ssize_t need = o->len + size;
    Py_ssize_t cap = o->body == NULL ? 0 : PyBytes_GET_SIZE(o->body);
    if (need > cap) {
        Py_ssize_t grown = cap * 2 > need ? cap * 2 : need;
        if (grown < 4096) {
            grown = 4096;
        }
        if (o->body == NULL) {
            o->body = PyBytes_FromStringAndSize(NULL, grown);
            if (o->body == NULL) {
                return -1;
            }
        }
        else if (_PyBytes_Resize(&o->body, grown) < 0) {
            return -1;
        }
    }
    memcpy(PyBytes_AS_STRING(o->body) + o->len, rec, (size_t)size);
    o->len = need;
    if (o->n_units + 2 > o->cap_units) {
        Py_ssize_t grown = o->cap_units ? o->cap_units * 2 : 64;
        int64_t *units = PyMem_Realloc(o->units, (size_t)grown * sizeof(int64_t));
        if (units == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->units = units;
        o->cap_units = grown;
    }
    o->units[o->n_units++] = qo;
    o->units[o->n_units++] = size;
    return 0;
}

/* The tag codes of an exact set or frozenset of exact ints (those past int64 never match). */
static int
tag_codes(PyObject *set, int64_t **codes, Py_ssize_t *n)
{
    if (!PyAnySet_CheckExact(set)) {
        return OFF_PATH;
    }
    Py_ssize_t size = PySet_GET_SIZE(set);
    *codes = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(int64_t));
    if (*codes == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    *n = 0;
    Py_ssize_t pos = 0;
    PyObject *key;
    Py_hash_t hash;
    while (_PySet_NextEntry(set, &pos, &key, &hash)) {
        if (!PyLong_CheckExact(key)) {
            return OFF_PATH;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            return -2;
        }
        if (!overflow) {
            (*codes)[(*n)++] = (int64_t)x;
        }
    }
    return OK;
}

/* The arguments, in the reference's order. */
enum {
    A_CQ_FILES, A_CQ_FILE_SIZE, A_OFFSET, A_CL_FILES, A_CL_FILE_SIZE, A_COMMITLOG_MIN,
    A_TAG_CODES, A_RECORD_FILTER, A_MAX_COUNT, A_MAX_BYTES, A_MAX_SCAN, N_ARGS
};

PyObject *
pmq_pull_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (kwnames != NULL || nargs != N_ARGS || !PyList_CheckExact(args[A_CQ_FILES])
        || !PyList_CheckExact(args[A_CL_FILES]) || args[A_RECORD_FILTER] != Py_None) {
        return pmq_call_reference("pull_scan", args, nargs, kwnames);
    }
    PyObject *cq_files = args[A_CQ_FILES], *cl_files = args[A_CL_FILES];
    int64_t cq_file_size, offset, cl_file_size, commitlog_min, max_count, max_bytes, max_scan;
    if (as_int64(args[A_CQ_FILE_SIZE], 1, POS_LIMIT, &cq_file_size) != OK
        || as_int64(args[A_OFFSET], 0, POS_LIMIT / UNIT_SIZE, &offset) != OK
        || as_int64(args[A_CL_FILE_SIZE], 1, POS_LIMIT, &cl_file_size) != OK
        || as_int64(args[A_COMMITLOG_MIN], -POS_LIMIT, POS_LIMIT, &commitlog_min) != OK
        || as_int64(args[A_MAX_COUNT], -POS_LIMIT, POS_LIMIT, &max_count) != OK
        || as_int64(args[A_MAX_BYTES], -POS_LIMIT, POS_LIMIT, &max_bytes) != OK
        || as_int64(args[A_MAX_SCAN], -POS_LIMIT, POS_LIMIT, &max_scan) != OK) {
        return pmq_call_reference("pull_scan", args, nargs, kwnames);
    }
    int64_t *codes = NULL;
    Py_ssize_t n_codes = 0;
    int filtered = args[A_TAG_CODES] != Py_None;
    int rc = OK;
    if (filtered) {
        rc = tag_codes(args[A_TAG_CODES], &codes, &n_codes);
        if (rc == -2) {
            PyMem_Free(codes);
            return NULL;
        }
    }
    Out out = {0};
    Seg cq = {0}, cl = {0};
    int64_t total = 0, scanned = 0, count = 0, next_begin = offset, last_phy = 0;
    int removing = 0, done = 0, failed = 0;
    int64_t byte_offset = offset * UNIT_SIZE;
    while (rc == OK && !done && scanned < max_scan) {
        PyObject *seg;
        rc = find(cq_files, cq_file_size, byte_offset, &seg);
        if (rc != OK || seg == NULL) {
            break;
        }
        rc = seg_enter(&cq, seg);
        if (rc != OK) {
            break;
        }
        int64_t pos = byte_offset - cq.from, end = cq.wrote;
        if (pos < 0 || pos >= end || cq.gone) {
            break;
        }
        int64_t avail = (end < cq.buf.len ? end : cq.buf.len) - pos;
        int64_t n = avail > 0 ? avail / UNIT_SIZE : 0;
        const unsigned char *unit = (const unsigned char *)cq.buf.buf + pos;
        int64_t qo = byte_offset / UNIT_SIZE;
        for (int64_t i = 0; i < n; i++, unit += UNIT_SIZE) {
            int64_t phy = load_be64(unit);
            int32_t size = load_be32(unit + 8);
            int64_t tags = load_be64(unit + 12);
            if (scanned >= max_scan) {
                done = 1;
                break;
            }
            if (count && total + size > max_bytes) {
                next_begin = qo;
                done = 1;
                break;
            }
            scanned++;
            next_begin = qo + 1;
            last_phy = phy;
            qo++;
            if (size == BLANK_UNIT_SIZE || phy < commitlog_min) {
                removing = 1;
                continue;
            }
            if (filtered) {
                Py_ssize_t k = 0;
                while (k < n_codes && codes[k] != tags) {
                    k++;
                }
                if (k == n_codes) {
                    continue;
                }
            }
            /* CommitLog.read; the segment stays held while records stay in it. */
            PyObject *found;
            rc = find(cl_files, cl_file_size, phy, &found);
            if (rc != OK) {
                break;
            }
            if (found == NULL) {
                removing = 1;
                continue;
            }
            if (found != cl.seg) {
                rc = seg_enter(&cl, found);
                if (rc != OK) {
                    break;
                }
            }
            int64_t rpos = phy - cl.from;
            if (size <= 0 || rpos < 0 || rpos > cl.wrote - size || cl.gone
                || rpos > cl.buf.len - size) {
                removing = 1;
                continue;
            }
            if (out_add(&out, (const unsigned char *)cl.buf.buf + rpos, size, qo - 1) < 0) {
                failed = 1;
                break;
            }
            total += size;
            count++;
            if (count >= max_count) {
                done = 1;
                break;
            }
        }
        if (failed || rc != OK) {
            break;
        }
        int64_t following = cq.from + end;
        if (end < cq_file_size || following <= byte_offset) {
            break;
        }
        byte_offset = following;
    }
    seg_release(&cq);
    seg_release(&cl);
    PyMem_Free(codes);
    if (failed || rc != OK) {
        Py_XDECREF(out.body);
        PyMem_Free(out.units);
        return failed ? NULL : pmq_call_reference("pull_scan", args, nargs, kwnames);
    }
    PyObject *body;
    if (out.body == NULL) {
        body = PyBytes_FromStringAndSize(NULL, 0);
    }
    else {
        body = out.body;
        if (_PyBytes_Resize(&body, out.len) < 0) {
            body = NULL;
        }
    }
    PyObject *units = PyBytes_FromStringAndSize((const char *)out.units,
                                                out.n_units * (Py_ssize_t)sizeof(int64_t));
    PyMem_Free(out.units);
    if (body == NULL || units == NULL) {
        Py_XDECREF(body);
        Py_XDECREF(units);
        return NULL;
    }
    PyObject *result = PyTuple_New(5);
    PyObject *next = PyLong_FromLongLong(next_begin), *last = PyLong_FromLongLong(last_phy);
    if (result == NULL || next == NULL || last == NULL) {
        Py_XDECREF(result);
        Py_XDECREF(next);
        Py_XDECREF(last);
        Py_DECREF(body);
        Py_DECREF(units);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, body);
    PyTuple_SET_ITEM(result, 1, units);
    PyTuple_SET_ITEM(result, 2, next);
    PyTuple_SET_ITEM(result, 3, last);
    PyTuple_SET_ITEM(result, 4, Py_NewRef(removing ? Py_True : Py_False));
    return result;
}
