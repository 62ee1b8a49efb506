"""Shared machinery of the crash tests: the bench writer as a child process, and the checks a
store must pass after the child died (SIGKILL) or gave up (full disk).

The child is ``pocketmq store bench --progress --json``: message ``i`` is fully determined by
``i`` (pocketmq.store.bench), and each ``{"acked": N}`` line promises that messages 0..N-1 were
all acknowledged. The checks compare the store, after recovery, with that promise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pocketmq.protocol.message import MessageConst, MessageExt
from pocketmq.protocol.record_codec import decode_message
from pocketmq.store.bench import bench_body, bench_key, bench_message, bench_topic
from pocketmq.store.config import StoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetStatus

# Small files so that every kind rolls within a few thousand messages: a ~680-byte record puts
# ~1,540 records in a CommitLog segment, 300 units in a ConsumeQueue file (one roll per queue
# every 1,200 messages) and 2,000 messages (two keys each) in an index file.
BROKER_CONF = """\
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=1000
maxIndexNum=4000
"""
COMMITLOG_FILE_SIZE = 1 << 20
CQ_FILE_SIZE = 6000
INDEX_FILE_SIZE = 40 + 4 * 1000 + 20 * 4000

COUNT = 200_000  # never reached: every run is killed or fails well before
SIZE = 512
TOPICS = 1
QUEUES = 4
# The newest messages found after a crash are also looked up by UNIQ_KEY (besides KEYS).
RECENT_MESSAGES = 64
CRASH_CHILD = Path(__file__).with_name("crash_child.py")
# Generous bounds for a child to make progress; they only turn a hang into a failure.
STARTUP_TIMEOUT_S = 30.0
PROGRESS_TIMEOUT_S = 60.0


def crash_seed() -> int:
    """A fresh seed per test, or POCKETMQ_CRASH_SEED to replay one (timing still varies)."""
    fixed = os.environ.get("POCKETMQ_CRASH_SEED")
    return int(fixed) if fixed else random.SystemRandom().randrange(1 << 32)


def write_broker_conf(directory: Path) -> Path:
    conf = directory / "broker.conf"
    conf.write_text(BROKER_CONF)
    return conf


def bench_args(store_dir: Path, conf: Path, flush: str, writers: int) -> list[str]:
    """Arguments of ``pocketmq`` (after the program name) for a crash-test bench run."""
    return [
        "store",
        "bench",
        "--dir",
        str(store_dir),
        "--count",
        str(COUNT),
        "--size",
        str(SIZE),
        "--flush",
        flush,
        "--writers",
        str(writers),
        "--topics",
        str(TOPICS),
        "--queues",
        str(QUEUES),
        "--progress",
        "--json",
        "-c",
        str(conf),
    ]


class BenchProcess:
    """A bench child whose stdout (parsed JSON lines) and stderr are read by threads.

    stderr is a pipe, not a file, because a child under RLIMIT_FSIZE cannot grow files.
    Use as a context manager: leaving it kills the child if it still runs and reaps it.
    """

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.last_acked = 0  # the last {"acked": N} seen: 0..N-1 are acknowledged
        self.acked_lines = 0
        self.result: dict[str, Any] | None = None  # the final --json result, if printed
        self.other_lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr_chunks: list[str] = []
        self._proc: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []
        self._eof = False

    def __enter__(self) -> BenchProcess:
        self._proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            bufsize=1,
        )
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                self.kill()
        finally:
            proc.wait()
            for reader in self._readers:
                reader.join(timeout=10)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()

    @property
    def proc(self) -> subprocess.Popen[str]:
        assert self._proc is not None, "use BenchProcess as a context manager"
        return self._proc

    def _read_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        for line in stderr:
            self._stderr_chunks.append(line)

    def _absorb(self, line: str) -> None:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.other_lines.append(line)
            return
        if isinstance(obj, dict) and set(obj) == {"acked"}:
            self.acked_lines += 1
            self.last_acked = max(self.last_acked, int(obj["acked"]))
        elif isinstance(obj, dict) and "first_error" in obj:
            self.result = obj
        else:
            self.other_lines.append(line)

    def _next_line(self, deadline: float, waiting_for: str) -> bool:
        """Absorb the next stdout line; False at end of output."""
        if self._eof:
            return False
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                f"no {waiting_for} from the bench within the time limit; "
                f"last acked {self.last_acked}\n{self.describe()}"
            ) from None
        if line is None:
            self._eof = True
            return False
        self._absorb(line)
        return True

    def wait_for_acked(self, threshold: int, timeout_s: float = PROGRESS_TIMEOUT_S) -> int:
        """Read progress until a line says at least threshold messages are acknowledged.

        Raises:
            AssertionError: the child ended or went quiet first.
        """
        deadline = time.monotonic() + timeout_s
        while self.last_acked < threshold:
            if not self._next_line(deadline, f"acked >= {threshold}"):
                raise AssertionError(
                    f"the bench ended before acked >= {threshold}\n{self.describe()}"
                )
        return self.last_acked

    def wait_for_first_line(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        if not self._next_line(deadline, "first line"):
            raise AssertionError(f"the bench printed nothing\n{self.describe()}")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=STARTUP_TIMEOUT_S)

    def finish(self, timeout_s: float = PROGRESS_TIMEOUT_S) -> int:
        """Wait for the child to end (by itself, or after kill), absorb every line it printed
        and return its exit status."""
        deadline = time.monotonic() + timeout_s
        while self._next_line(deadline, "end of output"):
            pass
        status = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for reader in self._readers:
            reader.join(timeout=max(0.1, deadline - time.monotonic()))
        return status

    def stderr_text(self) -> str:
        return "".join(self._stderr_chunks)

    def describe(self) -> str:
        return (
            f"exit status {self.proc.poll()}; {self.acked_lines} progress lines; "
            f"result {self.result}; other stdout {self.other_lines[-5:]}\n"
            f"stderr (tail):\n{self.stderr_text()[-3000:]}"
        )


def pocketmq_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pocketmq.cli", *args]


def crash_child_argv(faults: Sequence[str], args: Sequence[str]) -> list[str]:
    """``pocketmq args`` run by crash_child.py with the given fault options."""
    return [sys.executable, str(CRASH_CHILD), *faults, "--", *args]


def run_inspect(store_dir: Path, conf: Path) -> subprocess.CompletedProcess[str]:
    """``pocketmq store inspect DIR --verify --json -c CONF`` (exit status 1 on a problem)."""
    return subprocess.run(
        pocketmq_argv("store", "inspect", str(store_dir), "--verify", "--json", "-c", str(conf)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def verify_with_inspect(store_dir: Path, conf: Path, ctx: str) -> dict[str, Any]:
    """Run ``store inspect --verify``, assert it found nothing wrong; returns its report."""
    done = run_inspect(store_dir, conf)
    try:
        report: dict[str, Any] = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        report = {}
    assert done.returncode == 0 and report, (
        f"{ctx}: inspect --verify exited {done.returncode}; problems "
        f"{report.get('problem_count')}: {report.get('problems', [])[:20]}\n"
        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"
    )
    return report


def store_config(store_dir: Path, conf: Path) -> StoreConfig:
    return StoreConfig.from_file(conf, store_path_root_dir=store_dir)


@contextlib.contextmanager
def opened_store(store_dir: Path, conf: Path) -> Iterator[MessageStore]:
    store = MessageStore(store_config(store_dir, conf))
    store.open()
    try:
        yield store
    finally:
        store.close()


def message_index(msg: MessageExt, where: str) -> int:
    """The bench index i of a decoded record (from its KEYS), or an AssertionError."""
    key = msg.properties.get(MessageConst.KEYS, "")
    prefix = bench_key(0)[:-1]
    assert key.startswith(prefix) and key[len(prefix) :].isdigit(), (
        f"{where}: record with KEYS {key!r} is not a bench message"
    )
    return int(key[len(prefix) :])


def check_bench_message(msg: MessageExt, i: int, where: str) -> None:
    """The decoded record is exactly bench message i (topic, queue, body, KEYS/TAGS/UNIQ_KEY)."""
    want = bench_message(i, SIZE, TOPICS, QUEUES)
    assert (msg.topic, msg.queue_id) == (want.topic, want.queue_id), (
        f"{where}: message {i} is in {msg.topic}/{msg.queue_id}, "
        f"expected {want.topic}/{want.queue_id}"
    )
    assert msg.body == bench_body(i, SIZE), f"{where}: body of message {i} differs"
    for name in (MessageConst.KEYS, MessageConst.TAGS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
        assert msg.properties.get(name) == want.properties[name], (
            f"{where}: property {name} of message {i} is {msg.properties.get(name)!r}, "
            f"expected {want.properties[name]!r}"
        )


@dataclass
class StoreContents:
    """What the consume queues hold: bench index -> (topic, queue id, queue offset), and
    bench index -> store timestamp."""

    where: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    stored_at_ms: dict[int, int] = field(default_factory=dict)
    max_offsets: dict[tuple[str, int], int] = field(default_factory=dict)


def read_all_queues(store: MessageStore, ctx: str) -> StoreContents:
    """Walk every consume queue from offset 0 to its max, decoding (with CRC) every record.

    Asserts that offsets are contiguous (no gap, no blank unit, nothing retention removed),
    that every unit points at a whole record of its own queue and offset, and that every
    record is a bench message stored once.
    """
    contents = StoreContents()
    expected_topics = {bench_topic(s, TOPICS, QUEUES)[0] for s in range(TOPICS * QUEUES)}
    assert set(store.topics()) <= expected_topics, (
        f"{ctx}: unexpected topics {sorted(set(store.topics()) - expected_topics)}"
    )
    for topic in store.topics():
        for qid in sorted(store.consume_queue_table[topic]):
            name = f"{topic}/{qid}"
            assert 0 <= qid < QUEUES, f"{ctx}: unexpected queue {name}"
            assert store.get_min_offset_in_queue(topic, qid) == 0, (
                f"{ctx}: {name} does not start at offset 0"
            )
            max_offset = store.get_max_offset_in_queue(topic, qid)
            contents.max_offsets[(topic, qid)] = max_offset
            offset = 0
            while offset < max_offset:
                got = store.get_message(topic, qid, offset, 32)
                assert got.status is GetStatus.FOUND, (
                    f"{ctx}: {name} offset {offset} of {max_offset}: {got.status.value}"
                )
                assert got.queue_offsets == list(range(offset, offset + len(got.queue_offsets))), (
                    f"{ctx}: {name} skips offsets after {offset}: {got.queue_offsets}"
                )
                for qo, raw in zip(got.queue_offsets, got.messages, strict=True):
                    where = f"{ctx}: {name} offset {qo}"
                    msg = decode_message(raw, check_crc=True)
                    assert msg.queue_offset == qo, (
                        f"{where}: the record says queue offset {msg.queue_offset}"
                    )
                    i = message_index(msg, where)
                    check_bench_message(msg, i, where)
                    assert i not in contents.where, (
                        f"{where}: message {i} already found at {contents.where[i]}"
                    )
                    contents.where[i] = (topic, qid, qo)
                    contents.stored_at_ms[i] = msg.store_timestamp
                offset = got.next_begin_offset
    return contents


def check_acknowledged(
    store: MessageStore, contents: StoreContents, acked: int, single_writer: bool, ctx: str
) -> None:
    """Every acknowledged message is in its queue and found by key; with one writer the store
    holds exactly a prefix of the messages and message i sits at queue offset i // QUEUES."""
    missing = [i for i in range(acked) if i not in contents.where]
    assert not missing, (
        f"{ctx}: {len(missing)} acknowledged messages are missing, first {missing[:10]}"
    )
    if single_writer:
        found = len(contents.where)
        assert sorted(contents.where) == list(range(found)), (
            f"{ctx}: the messages present are not a prefix 0..{found - 1}"
        )
        for i, (_, _, qo) in contents.where.items():
            assert qo == i // QUEUES, f"{ctx}: message {i} at queue offset {qo}"
    for i in range(acked):
        check_found_by_key(store, contents, i, MessageConst.KEYS, ctx)
    # The crash hit the newest messages, acknowledged or not: each of their keys must be
    # indexed (a kill between the two keys of one record must not leave one out).
    for i in sorted(contents.where)[-RECENT_MESSAGES:]:
        for name in (MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            check_found_by_key(store, contents, i, name, ctx)


def check_found_by_key(
    store: MessageStore, contents: StoreContents, i: int, name: str, ctx: str
) -> None:
    """query_message finds exactly message i by its property ``name`` (KEYS or UNIQ_KEY)."""
    want = bench_message(i, SIZE, TOPICS, QUEUES)
    key = want.properties[name]
    # The window a client would give: around the store time (index times are in seconds).
    ts = contents.stored_at_ms[i]
    found = store.query_message(want.topic, key, 4, ts - 1000, ts + 1000)
    assert len(found.messages) == 1, (
        f"{ctx}: query by {name} {key} (message {i}) found {len(found.messages)} records"
    )
    check_bench_message(decode_message(found.messages[0]), i, f"{ctx}: by {name} {key}")


def check_no_stray_records(report: dict[str, Any], contents: StoreContents, ctx: str) -> None:
    """Every record in the CommitLog (as inspect counted them) is one of the bench messages
    found in the queues."""
    assert report["not_in_queue"] == 0, f"{ctx}: {report['not_in_queue']} records outside queues"
    assert report["records"] == len(contents.where), (
        f"{ctx}: the CommitLog holds {report['records']} records, the queues "
        f"{len(contents.where)} bench messages"
    )


def check_new_puts(store_dir: Path, conf: Path, contents: StoreContents, ctx: str) -> None:
    """New puts continue each queue at its max offset and survive a clean reopen, and the
    index entries they add leave the newest older messages findable by key."""
    next_i = max(contents.where, default=-1) + 1
    news = [bench_message(next_i + k, SIZE, TOPICS, QUEUES) for k in range(TOPICS * QUEUES)]
    with opened_store(store_dir, conf) as store:
        before = {
            (m.topic, m.queue_id): store.get_max_offset_in_queue(m.topic, m.queue_id) for m in news
        }

        async def put_all() -> list[int]:
            offsets = []
            for m in news:
                result = await store.put_message(m)
                assert result.ok, f"{ctx}: new put to {m.topic}/{m.queue_id}: {result}"
                offsets.append(result.queue_offset)
            return offsets

        offsets = asyncio.run(put_all())
        for m, qo in zip(news, offsets, strict=True):
            assert (
                qo
                == before[(m.topic, m.queue_id)]
                == contents.max_offsets.get((m.topic, m.queue_id), 0)
            ), f"{ctx}: new put to {m.topic}/{m.queue_id} got offset {qo}, expected {before}"
    with opened_store(store_dir, conf) as store:
        for k, (m, qo) in enumerate(zip(news, offsets, strict=True)):
            where = f"{ctx}: after reopening, {m.topic}/{m.queue_id} offset {qo}"
            assert store.get_max_offset_in_queue(m.topic, m.queue_id) == qo + 1, where
            got = store.get_message(m.topic, m.queue_id, qo, 1)
            assert got.status is GetStatus.FOUND, f"{where}: {got.status.value}"
            msg = decode_message(got.messages[0], check_crc=True)
            check_bench_message(msg, next_i + k, where)
            contents.stored_at_ms[next_i + k] = msg.store_timestamp
        for i in sorted(contents.stored_at_ms)[-RECENT_MESSAGES:]:
            for name in (MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
                check_found_by_key(store, contents, i, name, f"{ctx}: after new puts")


def check_recovered_store(
    store_dir: Path, conf: Path, acked: int, single_writer: bool, ctx: str
) -> int:
    """Recover the store, verify it with ``store inspect --verify``, check every acknowledged
    message and the absence of anything else, then check that new puts continue the queues.

    Returns how many bench messages the store held.
    """
    store_dir.mkdir(parents=True, exist_ok=True)  # a child killed early may not have made it
    with opened_store(store_dir, conf):
        pass  # open() recovers: abnormally when the child left the abort marker
    report = verify_with_inspect(store_dir, conf, ctx)
    with opened_store(store_dir, conf) as store:
        contents = read_all_queues(store, ctx)
        check_acknowledged(store, contents, acked, single_writer, ctx)
    check_no_stray_records(report, contents, ctx)
    check_new_puts(store_dir, conf, contents, ctx)
    return len(contents.where)
