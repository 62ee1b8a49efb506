/* libFuzzer harness for pocketmq._speedups (bench/fuzz/fuzz_native.sh builds and runs it).
 * Each input is one pull body: decode_pull_body (both retry flags) and decode_message (at
 * position 0 and inflating, on the whole input) must return what their pure-Python references
 * return, or raise the same exception with the same message; a difference aborts. The same
 * bytes are also read as a batch send's body (batch_messages), as dispatch requests written
 * into a consume-queue file (consume_queue_put_requests, 8 input bytes a request) and as the
 * messages of a put (dispatch_requests, encode_records and encode_batch_body, their tags and
 * keys cut from the input), as a batch's offsets (offset_msg_ids_text, 9 input bytes an offset), as a remoting
 * frame (decode_frame: as it is, and as a JSON header of the whole input or half of it; a
 * frame that decodes is encoded back by encode_frame_head, its remark the input's text), as a
 * connection's buffer for next_frame (the input, the input framed, and that framed twice, cut in
 * the second; read from three positions under three frame limits), as a
 * send's header (send_header, V1 and V2: fields of up to 16 NUL-separated words, each naming
 * its field by its first character), and as a
 * store for pull_scan: its first 8 bytes choose the segment sizes, the tag codes and the
 * limits, the rest splits into consume-queue and CommitLog segments; and as a record a Spark
 * reader decodes into its columns (add_record, at positions 0 and 1).
 * Memory errors are AddressSanitizer's to find: the extension is built with it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static PyObject *check;

static const char CHECK_SOURCE[] =
    "import dataclasses\n"
    "from pocketmq import _speedups as s\n"
    "from pocketmq.protocol import pull_body, record_codec\n"
    "def typed(v):\n"
    "    if isinstance(v, list): return [typed(x) for x in v]\n"
    "    if dataclasses.is_dataclass(v):\n"
    "        return [typed(getattr(v, f.name)) for f in dataclasses.fields(v)]\n"
    "    if isinstance(v, tuple): return tuple(typed(x) for x in v)\n"
    "    if isinstance(v, dict): return {typed(k): typed(x) for k, x in v.items()}\n"
    "    return type(v), v\n"
    "def outcome(f, *a, **k):\n"
    "    try: return typed(f(*a, **k))\n"
    "    except Exception as e: return type(e), str(e)\n"
    "from pocketmq.store import pull_scan\n"
    "class Seg:\n"
    "    __slots__ = ('file_from_offset', 'wrote_position', 'mm')\n"
    "    def __init__(self, start, wrote, mm):\n"
    "        self.file_from_offset, self.wrote_position, self.mm = start, wrote, mm\n"
    "def segments(data, size, short):\n"
    "    chunks = [data[i:i + size] for i in range(0, len(data), size)]\n"
    "    return [Seg(i * size, len(c) - (short if i == len(chunks) - 1 else 0), c)\n"
    "            for i, c in enumerate(chunks)]\n"
    "def check_scan(data):\n"
    "    if len(data) < 8: return\n"
    "    p = data[:8]\n"
    "    cut = 8 + (p[1] * 20) % (len(data) - 7)\n"
    "    cq_size, cl_size = 20 * (p[2] % 4 + 1), 32 * (p[3] % 8 + 1)\n"
    "    codes = None if p[4] & 1 else frozenset(range(-2, p[4] >> 5))\n"
    "    args = (segments(data[8:cut], cq_size, p[5] % 3), cq_size, p[6] % 6,\n"
    "            segments(data[cut:], cl_size, p[5] % 5), cl_size, p[7] % 3 * 16 - 16,\n"
    "            codes, None, p[6] % 40 - 1, p[7] * 4, p[0] % 50 - 1)\n"
    "    a = outcome(s.pull_scan, *args)\n"
    "    b = outcome(pull_scan.pull_scan_py, *args)\n"
    "    assert a == b, (data, a, b)\n"
    "def check(data):\n"
    "    check_scan(data)\n"
    "    for flag in (False, True):\n"
    "        a = outcome(s.decode_pull_body, data, flag)\n"
    "        b = outcome(pull_body.decode_pull_body_py, data, flag)\n"
    "        assert a == b, (data, flag, a, b)\n"
    "    for kw in ({}, {'inflate_body': True}):\n"
    "        a = outcome(s.decode_message, data, **kw)\n"
    "        b = outcome(record_codec.decode_message_py, data, **kw)\n"
    "        assert a == b, (data, kw, a, b)\n"
    "    check_put(data)\n"
    "    check_frame(data)\n"
    "    check_send_header(data)\n"
    "    check_rows(data)\n"
    "from pocketmq.spark import rows\n"
    "def check_rows(data):\n"
    "    for store in (False, True):\n"
    "        for pos in (0, 1):\n"
    "            got = []\n"
    "            for f in (s.add_record, rows.add_record_py):\n"
    "                cols = [[] for _ in range(14 if store else 12)]\n"
    "                got.append((outcome(f, cols, store, store, data, pos, len(data),\n"
    "                                    None if pos else 'T', 'b'), typed(cols)))\n"
    "            assert got[0] == got[1], (data, store, pos, got)\n"
    "from pocketmq.protocol import remoting\n"
    "def check_frame(data):\n"
    "    for frame in (data, b'\\0' + len(data).to_bytes(3, 'big') + data,\n"
    "                  b'\\0' + (len(data) // 2).to_bytes(3, 'big') + data):\n"
    "        a = outcome(s.decode_frame, frame)\n"
    "        b = outcome(remoting.decode_frame_py, frame)\n"
    "        assert a == b, (frame, a, b)\n"
    "        if a[0] == 'returns':\n"
    "            cmd = remoting.decode_frame_py(frame)\n"
    "            cmd.remark = data.decode('utf-8', 'surrogateescape')[:40]\n"
    "            a = outcome(s.encode_frame_head, cmd)\n"
    "            b = outcome(remoting.encode_frame_head_py, cmd)\n"
    "            assert a == b, (cmd, a, b)\n"
    "    check_next_frame(data)\n"
    "from pocketmq.protocol import connection\n"
    "def check_next_frame(data):\n"
    "    framed = len(data).to_bytes(4, 'big') + data\n"
    "    for buf in (data, framed, framed + framed[:len(data) // 2]):\n"
    "        for pos in (0, len(buf) // 3, len(data) + 4):\n"
    "            for limit in (len(data) + 4, 1 << 20, len(data) // 2):\n"
    "                a = outcome(s.next_frame, bytearray(buf), pos, limit)\n"
    "                b = outcome(connection.next_frame_py, bytearray(buf), pos, limit)\n"
    "                assert a == b, (buf, pos, limit, a, b)\n"
    "from pocketmq.protocol import send_header\n"
    "NAMES = sorted(send_header.V2_NAMES) + sorted(send_header.V2_NAMES.values()) + ['x']\n"
    "def check_send_header(data):\n"
    "    words = data.decode('latin-1').split('\\x00')[:16]\n"
    "    ext = {(NAMES[ord(w[0]) % len(NAMES)] if w else 'b'): w[1:] for w in words}\n"
    "    for v2 in (False, True):\n"
    "        for qn in (4, len(data) - 3):\n"
    "            a = outcome(s.send_header, ext, v2, qn)\n"
    "            b = outcome(send_header.send_header_py, ext, v2, qn)\n"
    "            assert a == b, (ext, v2, qn, a, b)\n"
    "from pocketmq.protocol import batch\n"
    "from pocketmq.protocol import message\n"
    "from pocketmq.protocol.message import MessageExt, host_to_bytes\n"
    "from pocketmq.store import consume_queue, dispatch\n"
    "from pocketmq.store.dispatch import DispatchRequest\n"
    "BASE = MessageExt(topic='T', body=b'', queue_id=1, properties={'A': '1', 'WAIT': 'true'})\n"
    "def requests(data):\n"
    "    out, qo = [], 2\n"
    "    for i in range(0, len(data) - 7, 8):\n"
    "        b = data[i:i + 8]\n"
    "        qo += (1, 1, 1, 0, 2, -1)[b[0] % 6]\n"
    "        phy = int.from_bytes(b[2:6], 'big', signed=True) << (b[6] % 48)\n"
    "        out.append(DispatchRequest('TU'[b[1] & 1], (b[1] >> 1) & 1, phy,\n"
    "            int.from_bytes(b[5:8], 'big', signed=True) << (b[7] % 24), phy ^ b[3] << 60,\n"
    "            0, qo, None, None, (0, 0, 4, 8, 12, -1)[(b[1] >> 2) % 6]))\n"
    "    return out\n"
    "def messages(data):\n"
    "    text = (data.decode('utf-16-le', 'surrogatepass') if len(data) % 2 == 0\n"
    "            else data.decode('latin-1'))\n"
    "    out = []\n"
    "    for i, word in enumerate(text.split('\\x00')[:16]):\n"
    "        props = {'TAGS': word, 'KEYS': word[:3]} if i % 3 else {'UNIQ_KEY': word}\n"
    "        topic = ('T', '%SYS%', 'SCHEDULE_TOPIC_XXXX', 'rmq_sys_wheel_timer')[i % 4]\n"
    "        out.append(MessageExt(topic=topic, body=b'', queue_id=i, properties=props))\n"
    "    return out\n"
    "def check_put(data):\n"
    "    a = outcome(s.batch_messages, BASE, data)\n"
    "    b = outcome(batch.batch_messages_py, BASE, data)\n"
    "    assert a == b, (data, a, b)\n"
    "    reqs = requests(data)\n"
    "    for pos, limit in ((0, 200), (40, 140), (60, 1 << 40)):\n"
    "        mm_a, mm_b = bytearray(160), bytearray(160)\n"
    "        args = (pos, limit, 0, 'T', 0, reqs, len(data) % 3)\n"
    "        a = outcome(s.consume_queue_put_requests, mm_a, *args)\n"
    "        b = outcome(consume_queue.consume_queue_put_requests_py, mm_b, *args)\n"
    "        assert a == b and mm_a == mm_b, (data, pos, limit, a, b)\n"
    "    msgs = messages(data)\n"
    "    a = outcome(s.encode_batch_body, msgs)\n"
    "    b = outcome(batch.encode_batch_body_py, msgs)\n"
    "    assert a == b, (data, a, b)\n"
    "    sizes = [len(m.properties) * 100 + 1 for m in msgs]\n"
    "    args = (msgs, sizes, [0] * len(msgs), list(range(len(msgs))), 5, 7, (1000,))\n"
    "    a = outcome(s.dispatch_requests, *args)\n"
    "    b = outcome(dispatch.dispatch_requests_py, *args)\n"
    "    assert a == b, (data, a, b)\n"
    "    store = data[:20] if len(data) % 2 else bytes(8)\n"
    "    hosts = {m.born_host: host_to_bytes(m.born_host) for m in msgs}\n"
    "    a = outcome(s.encode_records, msgs, store, hosts, 4096, len(data) * 40 + 100)\n"
    "    b = outcome(record_codec.encode_records_py, msgs, store, {}, 4096, len(data) * 40 + 100)\n"
    "    assert a == b, (data, a, b)\n"
    "    offsets = [int.from_bytes(data[i:i + 9], 'big', signed=True) for i in range(0, len(data), 9)]\n"
    "    a = outcome(s.offset_msg_ids_text, data[:len(data) % 29], offsets)\n"
    "    b = outcome(message.offset_msg_ids_text_py, data[:len(data) % 29], offsets)\n"
    "    assert a == b, (data, a, b)\n";

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    Py_InitializeEx(0);
    PyObject *globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject *done = PyRun_String(CHECK_SOURCE, Py_file_input, globals, globals);
    if (done == NULL) {
        PyErr_Print();
        abort();
    }
    Py_DECREF(done);
    check = PyDict_GetItemString(globals, "check");
    Py_INCREF(check);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size);
    PyObject *result = PyObject_CallOneArg(check, bytes);
    Py_DECREF(bytes);
    if (result == NULL) {
        PyErr_Print();
        abort();
    }
    Py_DECREF(result);
    return 0;
}
