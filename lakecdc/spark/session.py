"""The Spark session lakecdc runs on: the active one when there is one, else a small local one."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

from lakecdc.errors import LakecdcError
from lakecdc.spark.conf import EMBEDDED_CONF, JVM_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

def tasks_reread_archives() -> bool:
    """Whether this PySpark's Python tasks make every zip importer re-read its archive: before 4.2
    ``pyspark.worker_util.setup_spark_files`` invalidates the import caches at every task, which the
    embedded session's worker daemon (:mod:`lakecdc.spark.pyworker`) avoids; from 4.2 only a task
    that adds a path does, and Spark's own daemon is faster (bench/RESULTS.md, "The worker-daemon
    patch": a 60-task Python stage 1.6-1.9 s with it against 3.9-4.0 s without on 4.0.5, 1.7-2.0 s
    against 1.3-1.6 s on 4.3.0)."""
    import pyspark

    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    return (major, minor) < (4, 2)


#: Settings of the embedded session, sized for a 2-core laptop-class machine.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.driver.memory": "8g",
    # delta-rs merges the batch's net actions collected on the driver (one row per changed key):
    # 20,000,000 events over 5,000,000 keys are 9,000,000 actions, over Spark's default 1g
    "spark.driver.maxResultSize": "4g",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
    # Python workers forked from a daemon that keeps zip importers from re-reading pyspark.zip and
    # Spark's core jar at every task (0.25-1 s of CPU per task: see lakecdc/spark/pyworker.py);
    # PySpark before 4.2 only (tasks_reread_archives)
    "spark.python.daemon.module": "lakecdc.spark.pyworker",
    # Delta's engine rebuilds a table's state from its log in this many tasks (default 50, sized
    # for clusters): on a local session a small table's MERGE ran ~180 tasks, 3x its time
    "spark.databricks.delta.snapshotPartitions": "8",
}


def active_spark() -> SparkSession | None:
    """The Spark session running in this process, if any (none is started)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def get_spark(*, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Return the active Spark session, or start an embedded local one.

    In a notebook or on Databricks the session that already runs is reused untouched. Otherwise a
    local session is started with the settings in :data:`LOCAL_CONF` (UTC session time zone, no
    UI, 8 shuffle partitions), overridable through ``conf``; its JVM maps Spark's classes from the
    archive :mod:`lakecdc.spark.classarchive` wrote, when there is one.

    Example:
        >>> spark = get_spark()                                  # doctest: +SKIP
        >>> spark.conf.get("spark.sql.session.timeZone")         # doctest: +SKIP
        'UTC'
    """
    from pyspark.sql import SparkSession

    active = active_spark()
    if active is not None:
        return active
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise LakecdcError(
            "Java is not installed: Spark needs a Java 17 runtime. Install one (Debian: "
            "apt-get install openjdk-17-jre-headless) or set JAVA_HOME, then retry"
        )
    # Executors must run the same interpreter as the driver (it has pyarrow, fastavro, ...).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or os.environ.get("LAKECDC_SPARK_MASTER", "local[2]"))
    builder = builder.appName("lakecdc")
    # (imported here: `python -m lakecdc.spark.jars` and `python -m lakecdc.spark.classarchive` run
    # these modules as programs, which importing lakecdc must not have loaded already)
    from lakecdc.spark.classarchive import java_options
    from lakecdc.spark.jars import session_conf

    settings = {**LOCAL_CONF, **session_conf(), EMBEDDED_CONF: "true", **(conf or {})}
    if settings["spark.driver.extraJavaOptions"] == JVM_OPTIONS:
        # Spark's classes mapped from an archive written after installation, when there is one
        settings["spark.driver.extraJavaOptions"] = f"{JVM_OPTIONS} {java_options()}".strip()
    if not tasks_reread_archives() and "spark.python.daemon.module" not in (conf or {}):
        del settings["spark.python.daemon.module"]  # (Spark's own daemon is the faster one there)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("LAKECDC_SPARK_LOG_LEVEL", "ERROR"))
    return spark
