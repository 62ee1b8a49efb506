"""A streaming query over live traffic, SIGKILLed mid-batch and restarted from its checkpoint,
loses and repeats nothing in a sink idempotent on the batch id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from spark_helpers import Serve

from pocketmq.client import BlockingProducer, message
from waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SCRIPT = Path(__file__).with_name("stream_query_script.py")
# Live traffic: one message per PACE_S until the killed query has been started again.
PACE_S = 0.1


class Query:
    """The query script in its own process group, so that SIGKILL takes its JVM too."""

    def __init__(self, serve: Serve, workdir: Path, out: Path) -> None:
        self.log = open(workdir / "query.log", "ab")  # noqa: SIM115 - closed in kill()
        # A killed JVM leaves its scratch directories behind (its shutdown hook removes them):
        # in the test's directory, not in /tmp.
        scratch = workdir / "spark-scratch"
        scratch.mkdir(exist_ok=True)
        env = {
            **os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_DIRS": str(scratch),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}",
        }  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), serve.nameserver, "SparkStream",
             str(workdir / "checkpoint"), str(out), "40"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=SCRIPT.parent, env=env,
            start_new_session=True,
        )  # fmt: skip

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.log.close()


def batches(out: Path, prefix: str = "batch-") -> dict[int, list[list[object]]]:
    return {
        int(p.stem.split("-")[1]): json.loads(p.read_text())
        for p in sorted(out.glob(f"{prefix}*.json"))
    }


def test_stream_killed_and_restarted_loses_and_repeats_nothing(
    serve: Serve, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    sent: list[str] = []
    sent_while_down: list[str] = []
    stop, down, restarted = threading.Event(), threading.Event(), threading.Event()

    def traffic() -> None:
        with BlockingProducer("spark-stream-producer", serve.nameserver) as producer:
            i = 0
            while not stop.is_set() and not restarted.is_set():
                msg_id = producer.send(message("SparkStream", f"live-{i}")).msg_id
                sent.append(msg_id)
                if down.is_set():
                    sent_while_down.append(msg_id)
                i += 1
                time.sleep(PACE_S)  # the behaviour under test: live traffic, spread out

    # The topic exists before the query starts; the rest arrives while it runs.
    with BlockingProducer("spark-stream-producer", serve.nameserver) as producer:
        sent.append(producer.send(message("SparkStream", "first")).msg_id)
    sender = threading.Thread(target=traffic)
    query = Query(serve, tmp_path, out)
    try:
        sender.start()
        wait_until_sync(lambda: len(batches(out)) >= 3, 120, "three micro-batches")
        # Kill right after a batch reached the sink, before Spark commits it.
        seen = len(batches(out))
        wait_until_sync(lambda: len(batches(out)) > seen, 60, "the next micro-batch")
        query.kill()
        down.set()
        killed_at = len(batches(out))
        time.sleep(1)  # the behaviour under test: traffic goes on while the query is down
        down.clear()
        query = Query(serve, tmp_path, out)
        restarted.set()
        sender.join(60)
        assert not sender.is_alive()
        assert sent_while_down, "no message was sent while the query was down"

        def all_seen() -> bool:
            return {r[3] for rows in batches(out).values() for r in rows} >= set(sent)

        wait_until_sync(all_seen, 120, "every message in the sink")
    finally:
        stop.set()
        query.kill()
        sender.join(10)

    written = batches(out)
    assert sorted(written) == list(range(len(written))), "batch ids have gaps"
    ids = [r[3] for rows in written.values() for r in rows]
    assert len(ids) == len(set(ids)), "a message was delivered in two batches"
    assert set(ids) == set(sent)
    # maxOffsetsPerTrigger bounds each batch.
    assert max(len(rows) for rows in written.values()) <= 40
    # The batch in flight at the kill ran again with exactly the same messages.
    replays = batches(out, "replay-")
    assert replays, f"no batch was replayed after the kill at batch {killed_at}"
    for batch_id, rows in replays.items():
        assert rows == written[batch_id]
    # Per queue, offsets are read in order without gaps.
    per_queue: dict[tuple[str, int], list[int]] = {}
    for batch_id in sorted(written):
        for broker, qid, offset, *_ in written[batch_id]:
            per_queue.setdefault((broker, qid), []).append(offset)  # type: ignore[arg-type]
    for offsets in per_queue.values():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
