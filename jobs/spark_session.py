"""The Spark session of a job: local mode by default (`--master`, else $SPARK_MASTER_URL, else
local[2]), Python workers on this interpreter (the one that has spark_log installed, so
`python jobs/x.py` just works), pylog registered, UTC session time, loopback only in local
mode, and Spark's console output down to warnings.

A session that already runs in the process (a notebook's, a test's) is reused as it is, and
`running` stops only a session it started.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import spark_log

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_PANDAS_NOTICE = "PySpark does not yet fully support pandas"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("spark")
    group.add_argument("--master", default=os.environ.get("SPARK_MASTER_URL", "local[2]"),
                       help="Spark master URL (default: $SPARK_MASTER_URL, else local[2])")
    group.add_argument("--shuffle-partitions", type=int, default=2, metavar="N",
                       help="spark.sql.shuffle.partitions (state store partitions of the "
                            "aggregation; default 2)")


@contextlib.contextmanager
def running(app_name: str, master: str = "local[2]", shuffle_partitions: int = 2
            ) -> Iterator[Any]:
    """The active session, or a new one (stopped at the end of the block)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        spark_log.register(active)
        yield active
        return
    session = build(app_name, master, shuffle_partitions)
    try:
        yield session
    finally:
        session.stop()


def build(app_name: str, master: str = "local[2]", shuffle_partitions: int = 2) -> Any:
    """A new session set up for the jobs (or the one the process already has)."""
    from pyspark.sql import SparkSession

    _prepare_environment(master)
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.pollingDelay", "50ms")
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}")
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]))
    if master.startswith("local"):
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    spark_log.register(session)
    return session


def _prepare_environment(master: str) -> None:
    """Settings the JVM and the Python workers inherit; they must be set before Spark starts."""
    if master.startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message=_PANDAS_NOTICE, category=FutureWarning)
    notice = f"ignore:{_PANDAS_NOTICE}:FutureWarning"
    current = os.environ.get("PYTHONWARNINGS")
    if notice not in (current or ""):
        os.environ["PYTHONWARNINGS"] = f"{current},{notice}" if current else notice
