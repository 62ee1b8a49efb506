/* decode_frame: one remoting frame (without its length prefix) into a RemotingCommand, for
 * every request and response of the 4.x protocol. No I/O here.
 *
 * The fast path reads what RocketMQ clients and pocketmq send: a JSON header that is an object
 * of scalars, with extFields an object of strings, integers, booleans and nulls. Strings may
 * hold escapes (a V2 send's properties carry \u0001 and \u0002 separators). Everything else
 * goes to the reference registered as "decode_frame", which parses the header with orjson:
 * the binary (ROCKETMQ) serialization, floats, nested values, integers of more than 18
 * digits, "-0", duplicate keys, a code/version/opaque/flag that is not a JSON integer, a
 * language name that is not upper-case ASCII, invalid UTF-8, a lone surrogate, and every
 * malformed frame. So a frame the fast path takes is one the reference decodes to the same
 * command, and a bad frame gets the reference's exception. Every read is checked against the
 * header's end before it is made.
 *
 * The command is built without running the dataclass __init__: allocated by its type and its
 * slots filled through the slot descriptors' offsets, read once from the class the reference
 * builds (its module's global RemotingCommand), as decode.c builds MessageExt objects.
 */
#include "speedups.h"

#include <string.h>

enum cmd_field {
    C_CODE, C_LANGUAGE, C_VERSION, C_OPAQUE, C_FLAG, C_REMARK, C_EXT_FIELDS, C_BODY,
    C_SERIALIZE_TYPE, C_COUNT
};

static const char *const COMMAND_FIELDS[C_COUNT] = {
    "code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
    "serialize_type",
};

/* The RemotingCommand class, its slots' offsets, SerializeType.JSON and the reference's
 * LanguageCode by name (with JAVA, a header's default, and OTHER, for names it does not know):
 * strong references for the process's life. */
static PyTypeObject *command_type;
static Py_ssize_t slot_offset[C_COUNT];
static PyObject *serialize_json, *str_true, *str_false, *language_by_name;
static long long language_java, language_other;

#define SLOT(obj, f) (*(PyObject **)((char *)(obj) + slot_offset[f]))

static int
bind_command_type(void)
{
    if (command_type != NULL) {
        return 0;
    }
    PyObject *ref = PyDict_GetItemString(pmq_references(), "decode_frame");
    if (ref == NULL || !PyFunction_Check(ref)) {
        PyErr_SetString(PyExc_RuntimeError, "pocketmq._speedups: no reference implementation "
                                            "registered for decode_frame");
        return -1;
    }
    PyObject *globals = PyFunction_GetGlobals(ref);
    PyObject *cls = PyDict_GetItemString(globals, "RemotingCommand");
    PyObject *serialize = PyDict_GetItemString(globals, "SerializeType");
    PyObject *languages = PyDict_GetItemString(globals, "_LANGUAGE_BY_NAME");
    PyObject *java = languages != NULL ? PyDict_GetItemString(languages, "JAVA") : NULL;
    PyObject *other = languages != NULL ? PyDict_GetItemString(languages, "OTHER") : NULL;
    if (cls == NULL || !PyType_Check(cls) || serialize == NULL || languages == NULL
        || !PyDict_Check(languages) || java == NULL || other == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pocketmq._speedups: decode_frame's module has no "
                                            "RemotingCommand, SerializeType or languages");
        return -1;
    }
    language_java = PyLong_AsLongLong(java);
    language_other = PyLong_AsLongLong(other);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (pmq_slot_offsets(cls, COMMAND_FIELDS, C_COUNT, slot_offset) < 0) {
        return -1;
    }
    serialize_json = PyObject_GetAttrString(serialize, "JSON");
    str_true = PyUnicode_InternFromString("true");
    str_false = PyUnicode_InternFromString("false");
    if (serialize_json == NULL || str_true == NULL || str_false == NULL) {
        return -1;
    }
    Py_INCREF(cls);
    Py_INCREF(languages);
    language_by_name = languages;
    command_type = (PyTypeObject *)cls;
    return 0;
}

/* The parser's state over one header. `bail` is set, without an exception, for input the
 * fast path leaves to the reference; a real error (memory) sets an exception. */
struct parser {
    const unsigned char *p, *end;
    unsigned char *scratch; /* room for a decoded string: never longer than its JSON form */
};

enum value_kind { V_BAIL, V_ERROR, V_STRING, V_INT, V_TRUE, V_FALSE, V_NULL, V_OBJECT };

struct value {
    enum value_kind kind;
    PyObject *str;   /* V_STRING: a new reference */
    long long num;   /* V_INT */
    const unsigned char *num_text;
    Py_ssize_t num_len;
};

static void
skip_ws(struct parser *ps)
{
    while (ps->p < ps->end
           && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
        ps->p++;
    }
}

static int
hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (unsigned)(c - 'A' + 10);
        } else {
            return -1;
        }
    }
    *out = v;
    return 0;
}

/* A string's characters after its opening quote, up to and past the closing one, decoded into
 * ps->scratch; *len gets their UTF-8 length. 0, or -1 to bail. */
static int
scan_string(struct parser *ps, Py_ssize_t *len)
{
    unsigned char *out = ps->scratch;
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end) {
        unsigned char c = *p++;
        if (c == '"') {
            ps->p = p;
            *len = out - ps->scratch;
            return 0;
        }
        if (c < 0x20) {
            return -1; /* a raw control character: not JSON */
        }
        if (c != '\\') {
            *out++ = c;
            continue;
        }
        if (p >= end) {
            return -1;
        }
        c = *p++;
        switch (c) {
        case '"': case '\\': case '/': *out++ = c; break;
        case 'b': *out++ = '\b'; break;
        case 'f': *out++ = '\f'; break;
        case 'n': *out++ = '\n'; break;
        case 'r': *out++ = '\r'; break;
        case 't': *out++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (end - p < 4 || hex4(p, &cp) < 0) {
                return -1;
            }
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0
                    || lo < 0xDC00 || lo > 0xDFFF) {
                    return -1; /* a lone surrogate */
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return -1;
            }
            if (cp < 0x80) {
                *out++ = (unsigned char)cp;
            } else if (cp < 0x800) {
                *out++ = (unsigned char)(0xC0 | (cp >> 6));
                *out++ = (unsigned char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *out++ = (unsigned char)(0xE0 | (cp >> 12));
                *out++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                *out++ = (unsigned char)(0x80 | (cp & 0x3F));
            } else {
                *out++ = (unsigned char)(0xF0 | (cp >> 18));
                *out++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                *out++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                *out++ = (unsigned char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return -1;
        }
    }
    return -1; /* no closing quote */
}

/* The string whose opening quote is at ps->p, as a new str (V_STRING), or V_BAIL/V_ERROR. */
static enum value_kind
parse_string(struct parser *ps, PyObject **out)
{
    Py_ssize_t len;
    ps->p++;
    if (scan_string(ps, &len) < 0) {
        return V_BAIL;
    }
    *out = PyUnicode_DecodeUTF8((const char *)ps->scratch, len, NULL);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            return V_ERROR;
        }
        PyErr_Clear(); /* invalid UTF-8: the reference says how orjson refuses it */
        return V_BAIL;
    }
    return V_STRING;
}

static int
literal(struct parser *ps, const char *word, size_t n)
{
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        return -1;
    }
    ps->p += n;
    return 0;
}

/* A scalar value at ps->p (after whitespace); '{' is reported as V_OBJECT, unconsumed. */
static void
parse_value(struct parser *ps, struct value *v)
{
    v->str = NULL;
    skip_ws(ps);
    if (ps->p >= ps->end) {
        v->kind = V_BAIL;
        return;
    }
    unsigned char c = *ps->p;
    if (c == '"') {
        v->kind = parse_string(ps, &v->str);
        return;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const unsigned char *start = ps->p;
        int negative = c == '-';
        if (negative) {
            ps->p++;
        }
        const unsigned char *digits = ps->p;
        long long n = 0;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            if (ps->p - digits == 18) {
                v->kind = V_BAIL; /* may not fit 64 bits: the reference decides */
                return;
            }
            n = n * 10 + (*ps->p - '0');
            ps->p++;
        }
        Py_ssize_t ndigits = ps->p - digits;
        if (ndigits == 0 || (ndigits > 1 && digits[0] == '0') || (negative && n == 0)
            || (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))) {
            v->kind = V_BAIL; /* not JSON, "-0", or a float */
            return;
        }
        v->kind = V_INT;
        v->num = negative ? -n : n;
        v->num_text = start;
        v->num_len = ps->p - start;
        return;
    }
    if (c == '{') {
        v->kind = V_OBJECT;
        return;
    }
    if (literal(ps, "true", 4) == 0) {
        v->kind = V_TRUE;
    } else if (literal(ps, "false", 5) == 0) {
        v->kind = V_FALSE;
    } else if (literal(ps, "null", 4) == 0) {
        v->kind = V_NULL;
    } else {
        v->kind = V_BAIL; /* an array, or not JSON */
    }
}

/* After a member: a ',' (1, another member follows) or the closing '}' (0); -1 to bail. */
static int
after_member(struct parser *ps)
{
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        return 1;
    }
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return 0;
    }
    return -1;
}

/* A member's key at ps->p (after whitespace) and its colon: 0 with *key and *key_len pointing
 * into the scratch buffer, or -1 to bail. */
static int
parse_key(struct parser *ps, const unsigned char **key, Py_ssize_t *key_len)
{
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') {
        return -1;
    }
    ps->p++;
    if (scan_string(ps, key_len) < 0) {
        return -1;
    }
    *key = ps->scratch;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
        return -1;
    }
    ps->p++;
    return 0;
}

/* The extFields object whose '{' is at ps->p, coerced as the reference's _coerce_fields does:
 * 1 with a new dict in *out, 0 to bail, -1 on error. */
static int
parse_ext_fields(struct parser *ps, PyObject **out)
{
    ps->p++;
    PyObject *fields = PyDict_New();
    if (fields == NULL) {
        return -1;
    }
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        *out = fields;
        return 1;
    }
    for (;;) {
        const unsigned char *raw_key;
        Py_ssize_t key_len;
        if (parse_key(ps, &raw_key, &key_len) < 0) {
            goto bail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)raw_key, key_len, NULL);
        if (key == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                goto error;
            }
            PyErr_Clear();
            goto bail;
        }
        int seen = PyDict_Contains(fields, key);
        if (seen != 0) {
            Py_DECREF(key);
            if (seen < 0) {
                goto error;
            }
            goto bail; /* orjson keeps the last value of a repeated key, at the first's place */
        }
        struct value v;
        parse_value(ps, &v);
        PyObject *text = NULL;
        switch (v.kind) {
        case V_STRING: text = v.str; break;
        case V_INT:
            text = PyUnicode_DecodeASCII((const char *)v.num_text, v.num_len, NULL);
            break;
        case V_TRUE: text = Py_NewRef(str_true); break;
        case V_FALSE: text = Py_NewRef(str_false); break;
        case V_NULL: break; /* dropped, as the reference drops it */
        case V_ERROR: Py_DECREF(key); goto error;
        default: Py_DECREF(key); goto bail;
        }
        if (v.kind != V_NULL) {
            if (text == NULL) {
                Py_DECREF(key);
                goto error;
            }
            int bad = PyDict_SetItem(fields, key, text);
            Py_DECREF(text);
            if (bad < 0) {
                Py_DECREF(key);
                goto error;
            }
        }
        Py_DECREF(key);
        int more = after_member(ps);
        if (more < 0) {
            goto bail;
        }
        if (more == 0) {
            *out = fields;
            return 1;
        }
    }
bail:
    Py_DECREF(fields);
    return 0;
error:
    Py_DECREF(fields);
    return -1;
}

enum top_key { K_CODE, K_LANGUAGE, K_VERSION, K_OPAQUE, K_FLAG, K_REMARK, K_EXT_FIELDS,
               K_COUNT, K_OTHER };

static enum top_key
top_key(const unsigned char *k, Py_ssize_t n)
{
    static const char *const names[K_COUNT] = {
        "code", "language", "version", "opaque", "flag", "remark", "extFields",
    };
    for (int i = 0; i < K_COUNT; i++) {
        if ((size_t)n == strlen(names[i]) && memcmp(k, names[i], (size_t)n) == 0) {
            return (enum top_key)i;
        }
    }
    return K_OTHER;
}

/* LanguageCode of a header's language name: -1 when the reference must judge it (not
 * upper-case ASCII: its str.upper() has the last word), -2 on error. */
static long long
language_code(PyObject *name)
{
    if (!PyUnicode_IS_ASCII(name)) {
        return -1;
    }
    const char *s = (const char *)PyUnicode_DATA(name);
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] >= 'a' && s[i] <= 'z') {
            return -1;
        }
    }
    PyObject *code = PyDict_GetItemWithError(language_by_name, name);
    if (code == NULL) {
        return PyErr_Occurred() ? -2 : language_other;
    }
    long long value = PyLong_AsLongLong(code);
    return value == -1 && PyErr_Occurred() ? -2 : value;
}

/* The header's fields as the reference reads them. */
struct header {
    long long ints[K_COUNT]; /* code, language, version, opaque, flag */
    PyObject *remark;        /* NULL: None */
    PyObject *ext_fields;    /* NULL: an empty dict */
};

/* 1: *h holds the header; 0: bail; -1: error. */
static int
parse_header(struct parser *ps, struct header *h)
{
    unsigned seen = 0;
    h->ints[K_LANGUAGE] = language_java; /* when the header does not say */
    h->ints[K_VERSION] = h->ints[K_OPAQUE] = h->ints[K_FLAG] = 0;
    h->remark = h->ext_fields = NULL;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '{') {
        return 0;
    }
    ps->p++;
    skip_ws(ps);
    int more = 1;
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        more = 0;
    }
    while (more) {
        const unsigned char *raw_key;
        Py_ssize_t key_len;
        if (parse_key(ps, &raw_key, &key_len) < 0) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < key_len; i++) {
            if (raw_key[i] >= 0x80) {
                return 0; /* not ASCII: the reference checks its UTF-8 */
            }
        }
        enum top_key k = top_key(raw_key, key_len);
        if (k != K_OTHER) {
            if (seen & (1u << k)) {
                return 0; /* a repeated field: orjson keeps the last one */
            }
            seen |= 1u << k;
        }
        struct value v;
        parse_value(ps, &v);
        if (v.kind == V_ERROR) {
            return -1;
        }
        if (v.kind == V_BAIL) {
            return 0;
        }
        if (k == K_EXT_FIELDS && v.kind == V_OBJECT) {
            int got = parse_ext_fields(ps, &h->ext_fields);
            if (got <= 0) {
                return got;
            }
        } else if (v.kind == V_OBJECT) {
            return 0; /* a nested object elsewhere: the reference's business */
        } else if (k == K_REMARK) {
            if (v.kind == V_STRING) {
                h->remark = v.str;
                v.str = NULL;
            }
        } else if (k == K_LANGUAGE) {
            if (v.kind == V_STRING) {
                h->ints[K_LANGUAGE] = language_code(v.str);
                if (h->ints[K_LANGUAGE] < 0) {
                    Py_DECREF(v.str);
                    return h->ints[K_LANGUAGE] == -1 ? 0 : -1;
                }
            } else {
                h->ints[K_LANGUAGE] = v.kind == V_INT ? v.num : language_other;
            }
        } else if (k == K_EXT_FIELDS) {
            if (v.kind != V_NULL) {
                Py_XDECREF(v.str);
                return 0; /* not an object: the reference refuses it */
            }
        } else if (k != K_OTHER) {
            if (v.kind != V_INT) {
                Py_XDECREF(v.str);
                return 0; /* the reference parses strings and refuses the rest */
            }
            h->ints[k] = v.num;
        }
        Py_XDECREF(v.str);
        more = after_member(ps);
        if (more < 0) {
            return 0;
        }
    }
    skip_ws(ps);
    if (ps->p != ps->end || !(seen & (1u << K_CODE))) {
        return 0; /* trailing bytes, or no code */
    }
    return 1;
}

static PyObject *
build_command(struct header *h, const char *body, Py_ssize_t body_len)
{
    PyObject *cmd = command_type->tp_alloc(command_type, 0);
    if (cmd == NULL) {
        return NULL;
    }
    static const int int_fields[] = {C_CODE, C_LANGUAGE, C_VERSION, C_OPAQUE, C_FLAG};
    static const int int_keys[] = {K_CODE, K_LANGUAGE, K_VERSION, K_OPAQUE, K_FLAG};
    for (int i = 0; i < 5; i++) {
        PyObject *n = PyLong_FromLongLong(h->ints[int_keys[i]]);
        if (n == NULL) {
            Py_DECREF(cmd);
            return NULL;
        }
        SLOT(cmd, int_fields[i]) = n;
    }
    SLOT(cmd, C_REMARK) = h->remark != NULL ? h->remark : Py_NewRef(Py_None);
    h->remark = NULL;
    if (h->ext_fields == NULL) {
        h->ext_fields = PyDict_New();
        if (h->ext_fields == NULL) {
            Py_DECREF(cmd);
            return NULL;
        }
    }
    SLOT(cmd, C_EXT_FIELDS) = h->ext_fields;
    h->ext_fields = NULL;
    SLOT(cmd, C_SERIALIZE_TYPE) = Py_NewRef(serialize_json);
    PyObject *b = PyBytes_FromStringAndSize(body, body_len);
    if (b == NULL) {
        Py_DECREF(cmd);
        return NULL;
    }
    SLOT(cmd, C_BODY) = b;
    return cmd;
}

#define SCRATCH_ON_STACK 2048

/* The command of a frame (without its length prefix) whose header is JSON: 1 and *out set, 0
 * for the reference to take it (another serialization, anything the fast path does not read,
 * and every error), -1 with an exception. */
static int
decode_json_frame(const unsigned char *frame, Py_ssize_t len, PyObject **out)
{
    if (len < 4 || frame[0] != 0) { /* serialize type JSON */
        return 0;
    }
    Py_ssize_t header_len = ((Py_ssize_t)frame[1] << 16) | (frame[2] << 8) | frame[3];
    if (header_len > len - 4) {
        return 0;
    }
    unsigned char stack[SCRATCH_ON_STACK];
    unsigned char *scratch = header_len <= SCRATCH_ON_STACK
                                 ? stack : PyMem_Malloc((size_t)header_len);
    if (scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    struct parser ps = {frame + 4, frame + 4 + header_len, scratch};
    struct header h;
    int got = parse_header(&ps, &h);
    if (got > 0) {
        *out = build_command(&h, (const char *)frame + 4 + header_len, len - 4 - header_len);
        got = *out == NULL ? -1 : 1;
    }
    Py_XDECREF(h.remark);
    Py_XDECREF(h.ext_fields);
    if (scratch != stack) {
        PyMem_Free(scratch);
    }
    return got;
}

PyObject *
pmq_decode_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    if (nargs != 1 || kwnames != NULL
        || !(PyBytes_CheckExact(args[0]) || PyMemoryView_Check(args[0]))) {
        return pmq_call_reference("decode_frame", args, nargs, kwnames);
    }
    if (bind_command_type() < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); /* not contiguous: the reference copies what it reads */
        return pmq_call_reference("decode_frame", args, nargs, kwnames);
    }
    PyObject *cmd = NULL;
    int got = decode_json_frame(view.buf, view.len, &cmd);
    PyBuffer_Release(&view);
    if (got < 0) {
        return NULL;
    }
    if (got == 0) {
        return pmq_call_reference("decode_frame", args, nargs, kwnames);
    }
    return cmd;
}

/* --- next_frame -------------------------------------------------------------------------
 *
 * RemotingConnection.next_command's step: the frame at buf[pos:] of a bytearray and where the
 * next one starts, read in place (the reference slices the length prefix and makes two views,
 * which cost as much as the header's decode). The fast path takes an exact bytearray, a pos
 * and a max_frame that are ints within it, a length prefix within 4..max_frame and a frame
 * decode_frame's fast path reads; an incomplete frame is None; the reference takes the rest
 * (and raises the errors). The bytearray is held exported meanwhile, so nothing resizes it. */

#define MIN_FRAME 4

PyObject *
pmq_next_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    int64_t pos, max_frame;
    if (nargs != 3 || kwnames != NULL || !PyByteArray_CheckExact(args[0])
        || pmq_int64_in(args[1], 0, PY_SSIZE_T_MAX, &pos) < 0
        || pmq_int64_in(args[2], 0, INT32_MAX, &max_frame) < 0) {
        return pmq_call_reference("next_frame", args, nargs, kwnames);
    }
    if (bind_command_type() < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    int got = 0;
    Py_ssize_t avail = view.len - (Py_ssize_t)pos;
    if (avail >= 0 && avail < 4) {
        result = Py_NewRef(Py_None);
        got = 1;
    } else if (avail >= 4) {
        const unsigned char *p = (const unsigned char *)view.buf + pos;
        int32_t length = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16)
                                   | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
        if (length >= MIN_FRAME && length <= max_frame) {
            if (avail - 4 < length) {
                result = Py_NewRef(Py_None);
                got = 1;
            } else {
                PyObject *cmd = NULL;
                got = decode_json_frame(p + 4, length, &cmd);
                if (got > 0) {
                    PyObject *end = PyLong_FromSsize_t((Py_ssize_t)pos + 4 + length);
                    result = end == NULL ? NULL : PyTuple_Pack(2, cmd, end);
                    Py_XDECREF(end);
                    Py_DECREF(cmd);
                    got = result == NULL ? -1 : 1;
                }
            }
        }
    }
    PyBuffer_Release(&view);
    if (got < 0) {
        return NULL;
    }
    if (got == 0) {
        return pmq_call_reference("next_frame", args, nargs, kwnames);
    }
    return result;
}

/* --- encode_frame_head ------------------------------------------------------------------
 *
 * A frame's length prefix and JSON header, byte for byte what the reference writes with
 * orjson: the keys in its order, integers in decimal, strings as UTF-8 with `"`, `\` and the
 * control characters escaped (\b \t \n \f \r, else \u00xx). The fast path takes a command of
 * the JSON serialization whose code, language, version, opaque and flag are ints (not bools)
 * of 64 bits, with the language a code of 0..255, a remark that is None or a str, ext_fields
 * an exact dict of exact str, and an exact bytes body; everything else, a lone surrogate, and
 * a header or frame too long for the prefix, goes to the reference (the binary serialization,
 * and the errors). */

#define LANGUAGE_CODES 256

/* LanguageCode.name_of(code) by code, filled as codes are met (the reference's map is fixed
 * at import): strong references for the process's life. */
static PyObject *language_names[LANGUAGE_CODES];

static PyObject *
language_name(long long code)
{
    if (language_names[code] == NULL) {
        PyObject *ref = PyDict_GetItemString(pmq_references(), "decode_frame");
        PyObject *codes = PyDict_GetItemString(PyFunction_GetGlobals(ref), "LanguageCode");
        if (codes == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "pocketmq._speedups: decode_frame's module has no LanguageCode");
            return NULL;
        }
        PyObject *name = PyObject_CallMethod(codes, "name_of", "L", code);
        if (name == NULL) {
            return NULL;
        }
        if (!PyUnicode_CheckExact(name)) {
            Py_DECREF(name);
            PyErr_SetString(PyExc_RuntimeError,
                            "pocketmq._speedups: LanguageCode.name_of returned a non-str");
            return NULL;
        }
        language_names[code] = name;
    }
    return language_names[code];
}

/* An int field as the fast path takes it into *out: 1, or 0 (no exception left set). */
static int
int_field(PyObject *v, long long *out)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        return 0;
    }
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The UTF-8 of an exact str, or NULL (no exception left set) for a lone surrogate. */
static const unsigned char *
utf8_of(PyObject *s, Py_ssize_t *len)
{
    const char *p = PyUnicode_AsUTF8AndSize(s, len);
    if (p == NULL) {
        PyErr_Clear();
    }
    return (const unsigned char *)p;
}

static const char HEX_LOWER[16] = "0123456789abcdef";

/* Bytes of UTF-8 text written as a JSON string's contents. */
static Py_ssize_t
escaped_len(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t out = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f'
            || c == '\r') {
            out += 1;
        } else if (c < 0x20) {
            out += 5;
        }
    }
    return out;
}

static char *
put_escaped(char *p, const unsigned char *s, Py_ssize_t n)
{
    *p++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\t': *p++ = 't'; break;
        case '\n': *p++ = 'n'; break;
        case '\f': *p++ = 'f'; break;
        case '\r': *p++ = 'r'; break;
        default:
            memcpy(p, "u00", 3);
            p[3] = HEX_LOWER[c >> 4];
            p[4] = HEX_LOWER[c & 0xF];
            p += 5;
        }
    }
    *p++ = '"';
    return p;
}

static char *
put_text(char *p, const char *text)
{
    size_t n = strlen(text);
    memcpy(p, text, n);
    return p + n;
}

static char *
put_int(char *p, long long v)
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", v);
    memcpy(p, digits, (size_t)n);
    return p + n;
}

#define MAX_EXT_FIELDS 64

PyObject *
pmq_encode_frame_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    (void)self;
    if (nargs != 1 || kwnames != NULL) {
        return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
    }
    if (bind_command_type() < 0) {
        return NULL;
    }
    PyObject *cmd = args[0];
    if (Py_TYPE(cmd) != command_type || SLOT(cmd, C_SERIALIZE_TYPE) != serialize_json) {
        return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
    }
    static const int int_slots[] = {C_CODE, C_LANGUAGE, C_VERSION, C_OPAQUE, C_FLAG};
    long long ints[5];
    for (int i = 0; i < 5; i++) {
        PyObject *v = SLOT(cmd, int_slots[i]);
        if (v == NULL || !int_field(v, &ints[i])) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
    }
    PyObject *remark = SLOT(cmd, C_REMARK), *ext = SLOT(cmd, C_EXT_FIELDS);
    PyObject *body = SLOT(cmd, C_BODY);
    if (ints[1] < 0 || ints[1] >= LANGUAGE_CODES || remark == NULL
        || (remark != Py_None && !PyUnicode_CheckExact(remark)) || ext == NULL
        || !PyDict_CheckExact(ext) || PyDict_GET_SIZE(ext) > MAX_EXT_FIELDS || body == NULL
        || !PyBytes_CheckExact(body)) {
        return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
    }
    PyObject *language = language_name(ints[1]);
    if (language == NULL) {
        return NULL;
    }
    /* Every string's UTF-8 first (the dict cannot change meanwhile: nothing here runs Python
       code), then the exact length, then one pass that writes. */
    const unsigned char *text[2 + 2 * MAX_EXT_FIELDS];
    Py_ssize_t text_len[2 + 2 * MAX_EXT_FIELDS];
    int count = 0;
    text[count] = utf8_of(language, &text_len[count]);
    if (text[count++] == NULL) {
        return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
    }
    if (remark != Py_None) {
        text[count] = utf8_of(remark, &text_len[count]);
        if (text[count++] == NULL) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
        text[count] = utf8_of(key, &text_len[count]);
        if (text[count++] == NULL) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
        text[count] = utf8_of(value, &text_len[count]);
        if (text[count++] == NULL) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
    }
    /* {"code":,"language":,"version":,"opaque":,"flag":,"remark":,"extFields":{},
       "serializeTypeCurrentRPC":"JSON"} around the values: at most 140 bytes, 20 digits an
       integer, 3 bytes (quotes, a separator) a string. */
    Py_ssize_t header_len = 140 + 4 * 20;
    for (int i = 0; i < count; i++) {
        if (text_len[i] > (PY_SSIZE_T_MAX / 8)) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
        header_len += escaped_len(text[i], text_len[i]) + 3;
        if (header_len > 0xFFFFFF) {
            return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
        }
    }
    char *buf = PyMem_Malloc((size_t)header_len + 8);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    char *p = buf + 8;
    int t = 0;
    p = put_int(put_text(p, "{\"code\":"), ints[0]);
    p = put_escaped(put_text(p, ",\"language\":"), text[t], text_len[t]);
    t++;
    p = put_int(put_text(p, ",\"version\":"), ints[2]);
    p = put_int(put_text(p, ",\"opaque\":"), ints[3]);
    p = put_int(put_text(p, ",\"flag\":"), ints[4]);
    if (remark != Py_None) {
        p = put_escaped(put_text(p, ",\"remark\":"), text[t], text_len[t]);
        t++;
    }
    if (t < count) {
        p = put_text(p, ",\"extFields\":{");
        for (; t < count; t += 2) {
            p = put_escaped(p, text[t], text_len[t]);
            *p++ = ':';
            p = put_escaped(p, text[t + 1], text_len[t + 1]);
            *p++ = t + 2 < count ? ',' : '}';
        }
    }
    p = put_text(p, ",\"serializeTypeCurrentRPC\":\"JSON\"}");
    Py_ssize_t written = p - (buf + 8);
    Py_ssize_t total = 4 + written + PyBytes_GET_SIZE(body);
    PyObject *out = NULL;
    if (total > INT32_MAX) { /* the reference's prefix cannot hold it: its error */
        PyMem_Free(buf);
        return pmq_call_reference("encode_frame_head", args, nargs, kwnames);
    }
    unsigned char *prefix = (unsigned char *)buf;
    uint32_t fields[2] = {(uint32_t)total, (uint32_t)written}; /* serialize type JSON: 0 */
    for (int k = 0; k < 2; k++) {
        prefix[4 * k] = (unsigned char)(fields[k] >> 24);
        prefix[4 * k + 1] = (unsigned char)(fields[k] >> 16);
        prefix[4 * k + 2] = (unsigned char)(fields[k] >> 8);
        prefix[4 * k + 3] = (unsigned char)fields[k];
    }
    out = PyBytes_FromStringAndSize(buf, 8 + written);
    PyMem_Free(buf);
    return out;
}
