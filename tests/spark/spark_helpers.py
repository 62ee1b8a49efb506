"""Shared by the Spark tests: the Spark settings they run with and a ``pocketmq serve``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from server_procs import ServerProcess

SEGMENT_BYTES = 256 * 1024


def spark_conf() -> dict[str, str]:
    """The settings every Spark of these tests runs with: small, local, quiet."""
    return {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
        "spark.sql.streaming.stopTimeout": "10s",
        # Python workers must be this interpreter, the one pocketmq is installed in.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }


class Serve:
    """A running ``pocketmq serve`` with its store directory."""

    def __init__(self, workdir: Path) -> None:
        self.store = workdir / "store"
        conf = workdir / "broker.conf"
        # Small CommitLog segments, so that a store read crosses blank end-of-file records;
        # a small index, so that a test store takes megabytes instead of 1.5 GiB.
        conf.write_text(
            f"mappedFileSizeCommitLog={SEGMENT_BYTES}\nmaxHashSlotNum=1024\nmaxIndexNum=4096\n"
        )
        self.proc = ServerProcess(
            "serve", workdir, "--namesrv-port", "0", "--broker-port", "0",
            "--store", str(self.store), "-c", str(conf), listen=False,
        )  # fmt: skip
        self.nameserver = f"127.0.0.1:{self.proc.ready['namesrv']}"

    def stop(self) -> None:
        assert self.proc.stop() == 0, self.proc.log_path.read_text()
