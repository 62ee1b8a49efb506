/* libFuzzer harness for pocketmq._speedups' read path (bench/fuzz/fuzz_native.sh builds and
 * runs it). Each input is one pull body: decode_pull_body (both retry flags) and decode_message
 * (at position 0 and inflating, on the whole input) must return what their pure-Python
 * references return, or raise the same exception with the same message; a difference aborts.
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
    "def check(data):\n"
    "    for flag in (False, True):\n"
    "        a = outcome(s.decode_pull_body, data, flag)\n"
    "        b = outcome(pull_body.decode_pull_body_py, data, flag)\n"
    "        assert a == b, (data, flag, a, b)\n"
    "    for kw in ({}, {'inflate_body': True}):\n"
    "        a = outcome(s.decode_message, data, **kw)\n"
    "        b = outcome(record_codec.decode_message_py, data, **kw)\n"
    "        assert a == b, (data, kw, a, b)\n";

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
