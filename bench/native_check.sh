#!/usr/bin/env bash
# Runs the tests of pocketmq._speedups under AddressSanitizer + UndefinedBehaviorSanitizer,
# then under valgrind's memcheck: `make native-check` or `bench/native_check.sh [pytest args]`
# after changing src/pocketmq/_native. CHECKS names the checkers to run (default "asan
# valgrind"); `make test` runs "asan" (memcheck alone would take longer than the suite).
#
# Each run copies src/pocketmq to a temp dir, builds the extension there with its own flags and
# puts that copy first on PYTHONPATH, so the worktree's own build is left alone. PYTHONMALLOC=
# malloc makes every Python object a malloc block the checkers can see (pymalloc's arenas would
# hide an overrun inside them). Leak checks are off: CPython keeps much alive until exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
# The codec tests, the extension against its references first; memcheck is ~25x slower, so
# it runs those files; ASan runs every protocol and store unit test (these included) and the
# fuzz tests (malformed frames, requests and records into the codecs and a broker).
CODEC_TESTS=(tests/unit/protocol/test_native.py tests/unit/protocol/test_native_records.py
    tests/unit/protocol/test_native_frame.py tests/unit/protocol/test_native_frame_head.py
    tests/unit/protocol/test_native_send_header.py
    tests/unit/protocol/test_native_decode.py tests/unit/protocol/test_native_rows.py
    tests/unit/protocol/test_message.py tests/unit/store/test_native_index.py
    tests/unit/store/test_native_dispatch.py tests/unit/store/test_native_pull.py
    tests/unit/client/test_native_held.py)
ASAN_TESTS=(tests/unit/protocol tests/unit/store tests/unit/broker/test_unbatch.py
    tests/unit/client/test_native_held.py tests/fuzz)
if (($#)); then CODEC_TESTS=("$@") ASAN_TESTS=("$@"); fi
PYTEST=(-m pytest -q -x -p no:randomly -p no:cacheprovider --hypothesis-profile=sanitizer)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

build() {  # build DIR CFLAGS [LDFLAGS]: a copy of the package, the extension built with CFLAGS
    local dir="$WORK/$1"
    mkdir -p "$dir"
    cp -r src/pocketmq "$dir/pocketmq"
    rm -f "$dir"/pocketmq/_speedups*.so
    # setup.py marks the extension optional: a failed compile only warns, hence the check below.
    CFLAGS="$2" LDFLAGS="${3:-}" "$PY" setup.py -q build_ext --force \
        --build-lib "$dir" --build-temp "$WORK/$1-tmp" >"$WORK/$1.log" 2>&1 || true
    if ! ls "$dir"/pocketmq/_speedups*.so >/dev/null 2>&1; then
        cat "$WORK/$1.log" >&2
        echo "the $1 build of pocketmq._speedups failed" >&2
        exit 1
    fi
}

run_tests() {  # run_tests DIR TESTS-ARRAY [command prefix...]: the tests against that build
    local dir="$WORK/$1"
    local -n tests="$2"
    shift 2
    PYTHONMALLOC=malloc PYTHONPATH="$dir" "$@" "$PY" -c \
        'import sys, pocketmq._speedups as s; sys.exit(not s.__file__.startswith(sys.argv[1]))' \
        "$dir" || { echo "the $dir build is not the one imported" >&2; exit 1; }
    PYTHONMALLOC=malloc PYTHONPATH="$dir" "$@" "$PY" "${PYTEST[@]}" "${tests[@]}"
}

CHECKS="${CHECKS:-asan valgrind}"
for check in $CHECKS; do
    [[ $check == asan || $check == valgrind ]] || { echo "unknown check '$check'" >&2; exit 2; }
done
wants() { [[ " $CHECKS " == *" $1 "* ]]; }

if wants asan; then
    echo "== ASan + UBSan"
    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g"
    build asan "$SAN -Wall -Wextra -Werror" "-fsanitize=address,undefined"
    LIBASAN="$(gcc -print-file-name=libasan.so)"
    LIBUBSAN="$(gcc -print-file-name=libubsan.so)"
    LD_PRELOAD="$LIBASAN $LIBUBSAN" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1 run_tests asan ASAN_TESTS
fi
if ! wants valgrind; then
    echo "native-check ($CHECKS): no errors"
    exit 0
fi

echo "== valgrind memcheck"
build valgrind "-O1 -g"
# CPython itself draws memcheck reports (uninitialised reads in its int and dict code that
# CPython's Misc/valgrind-python.supp suppresses); an error fails this check when a frame of
# its stack is in the extension with no Python code between it and the error (the references
# the extension calls back are pure Python, whose reports are CPython's). Leak reports are left
# out: objects alive at exit are not leaks, and the extension's reference counting is checked
# by the tests' equality (and test_native_decode's memory test) instead.
run_tests valgrind CODEC_TESTS valgrind --leak-check=no --track-origins=yes --xml=yes \
    --xml-file="$WORK/memcheck.%p.xml"
"$PY" - "$WORK" <<'PY'
import pathlib, sys, xml.etree.ElementTree as ET

ours, others = [], 0
execed = 0
for path in pathlib.Path(sys.argv[1]).glob("memcheck.*.xml"):
    # A child that exec'd another program (ctypes.util.find_library runs ldconfig) leaves its
    # log unfinished: it ran no Python, so none of the extension either.
    if not path.read_text().rstrip().endswith("</valgrindoutput>"):
        execed += 1
        continue
    for error in ET.parse(path).getroot().iter("error"):
        if error.findtext("kind", "").startswith("Leak_"):
            continue
        frames = [
            f"{f.findtext('fn', '?')} ({f.findtext('file', f.findtext('obj', '?'))}:"
            f"{f.findtext('line', '')})"
            for f in error.iter("frame")
        ]
        # Innermost first. An error inside Python code that the extension called back (a
        # reference, via the eval loop) is the interpreter's, as in a pure-Python run.
        in_ours = ["_speedups" in (f.findtext("obj") or "") for f in error.find("stack")]
        in_eval = [f.findtext("fn", "").startswith("_PyEval_") for f in error.find("stack")]
        first_ours = in_ours.index(True) if any(in_ours) else -1
        if first_ours >= 0 and not any(in_eval[:first_ours]):
            ours.append(f"{error.findtext('kind')}: " + " <- ".join(frames[:8]))
        else:
            others += 1
print(f"memcheck: {len(ours)} errors in pocketmq._speedups, {others} in CPython itself "
      f"({execed} unfinished logs of exec'd children skipped)")
for line in ours:
    print(line)
sys.exit(1 if ours else 0)
PY
echo "native-check: no errors"
