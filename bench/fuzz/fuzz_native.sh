#!/usr/bin/env bash
# `make native-fuzz` installs clang and runs this. Fuzzes pocketmq._speedups' read path and a put's batch and dispatch functions with libFuzzer (clang, Debian's `clang` package):
# builds the extension with -fsanitize=fuzzer-no-link,address,undefined into a temp copy of
# the package, links fuzz_decode.c (which embeds CPython) against it, seeds the corpus with
# good pull bodies and runs for SECONDS (default 120). Not part of `make test`.
#   bash bench/fuzz/fuzz_native.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
SECONDS_TO_RUN="${1:-120}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lib" "$WORK/corpus"
cp -r src/pocketmq "$WORK/lib/pocketmq"
rm -f "$WORK"/lib/pocketmq/_speedups*.so
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -g -O1"
CC=clang LDSHARED="clang -shared" CFLAGS="$SAN" LDFLAGS="-fsanitize=address,undefined" \
    "$PY" setup.py -q build_ext --force --build-lib "$WORK/lib" --build-temp "$WORK/tmp" \
    >"$WORK/build.log" 2>&1 || true
ls "$WORK"/lib/pocketmq/_speedups*.so >/dev/null 2>&1 || { cat "$WORK/build.log"; exit 1; }
CONFIG="$("$PY" -c 'import sysconfig, os; print(os.path.join(sysconfig.get_config_var("BINDIR"), "python3-config"))')"
# shellcheck disable=SC2046
clang -fsanitize=fuzzer,address,undefined -g -O1 bench/fuzz/fuzz_decode.c \
    $("$CONFIG" --embed --cflags) $("$CONFIG" --embed --ldflags) -o "$WORK/fuzz_decode"
PYTHONPATH="$WORK/lib" "$PY" - "$WORK/corpus" <<'PY'
import pathlib, sys
from pocketmq.protocol.message import MessageExt
from pocketmq.protocol.record_codec import encode_record
out = pathlib.Path(sys.argv[1])
msgs = [
    MessageExt(topic="T", body=b"x" * 40, properties={"UNIQ_KEY": "U", "TAGS": "a"}),
    MessageExt(topic="%RETRY%g", body=b"", properties={"RETRY_TOPIC": "T"}, phy_offset=77),
    MessageExt(topic="T" * 200, body=b"\x78\x9c\x03\x00\x00\x00\x00\x01", sys_flag=1),
    MessageExt(topic="v6", body=b"b", born_host=("::1", 9), store_host=("10.0.0.1", 10911)),
]
for i, m in enumerate(msgs):
    (out / f"one{i}").write_bytes(bytes(encode_record(m)))
(out / "all").write_bytes(b"".join(bytes(encode_record(m)) for m in msgs))
from pocketmq.protocol.batch import encode_batch_body
(out / "batch").write_bytes(encode_batch_body(msgs))
# Stores for pull_scan (see check_scan in fuzz_decode.c): three units over a 256-byte
# CommitLog segment, every unit passing, then tag codes -2..1 picking two of them.
import struct
units = b"".join(struct.pack(">qiq", phy, size, tags) for phy, size, tags in
                 ((0, 40, 0), (50, 45, 5), (100, 50, 1)))
log = bytes(range(256))
(out / "scan").write_bytes(bytes([49, 3, 3, 7, 1, 0, 36, 100]) + units + log)
(out / "scan-tags").write_bytes(bytes([49, 3, 3, 7, 0x40, 0, 36, 100]) + units + log)
# A V2 send's JSON header, alone (check_frame prefixes it) and as a whole frame.
from pocketmq.protocol.properties import encode_properties
from pocketmq.protocol.remoting import RemotingCommand
send = RemotingCommand.request(310, {"a": "g", "b": "T", "e": 1, "i": encode_properties(
    {"TAGS": "t", "UNIQ_KEY": "U\u00e9"}), "k": False}, b"body")
frame = send.encode()[4:]
(out / "header").write_bytes(frame[4 : len(frame) - 4])
(out / "frame").write_bytes(frame)
PY
# The venv's site-packages after the copy: pocketmq.store (the dispatch references) imports
# the broker's dependencies.
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYTHONPATH="$WORK/lib:$SITE" PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1 \
    "$WORK/fuzz_decode" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -print_final_stats=1 \
    "$WORK/corpus" 2>&1 | tail -25
echo "fuzz_native: no finding in ${SECONDS_TO_RUN} s"
