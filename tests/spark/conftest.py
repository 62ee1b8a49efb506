"""Fixtures of the Spark tests: one SparkSession (local[1]) for the whole run and a
``pocketmq serve`` per module. Skipped without pyspark, pyarrow or a Java runtime."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pocketmq.spark needs pyspark: pip install 'pocketmq[spark]'")
pytest.importorskip("pyarrow", reason="pocketmq.spark needs pyarrow: pip install 'pocketmq[spark]'")

from spark_helpers import Serve, spark_conf

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)", allow_module_level=True)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import pocketmq.spark

    # Every Python worker, the data source planners' included, must run this interpreter.
    old = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[1]").appName("pocketmq-spark-tests")
    for key, value in spark_conf().items():
        builder = builder.config(key, value)
    builder = builder.config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    pocketmq.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
        if old is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = old


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("serve"))
    try:
        yield server
    finally:
        server.stop()
        # The broker preallocates a 1 GiB CommitLog segment and the index.
        shutil.rmtree(server.store, ignore_errors=True)
