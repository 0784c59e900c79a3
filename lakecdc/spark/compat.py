"""The only place that looks for optional engines: Delta Lake's Spark classes, Spark Connect."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lakecdc.errors import LakecdcError
from lakecdc.spark.conf import EMBEDDED_CONF, conf_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How many pieces a decoder cuts its input into when the session cannot say how many cores it has.
FALLBACK_PARALLELISM = 8


def is_spark_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session, which has no JVM handle to look into."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def jvm(spark: SparkSession) -> Any:
    """The py4j view of a classic session's JVM (``spark._jvm``); a LakecdcError on Spark Connect."""
    gateway = spark.sparkContext._jvm
    if gateway is None:
        raise LakecdcError("this Spark session has no JVM of its own (a Spark Connect session?)")
    return gateway


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks ``spark`` runs at once, for decoders that split their input among the cores.

    A classic session's ``defaultParallelism`` (its cores); a Spark Connect session has no
    SparkContext to ask, so its ``spark.default.parallelism`` or ``spark.sql.leafNodeDefaultParallelism``
    setting answers, else :data:`FALLBACK_PARALLELISM`.
    """
    if not is_spark_connect(spark):
        try:
            return max(int(spark.sparkContext.defaultParallelism), 1)
        except Exception:  # noqa: BLE001 - a platform that hides the SparkContext: ask the settings
            pass
    for key in ("spark.default.parallelism", "spark.sql.leafNodeDefaultParallelism"):
        value = conf_value(spark, key)
        if value and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return FALLBACK_PARALLELISM


def is_embedded(spark: SparkSession) -> bool:
    """True for a session :func:`lakecdc.spark.session.get_spark` started (not a user's or a platform's)."""
    return conf_value(spark, EMBEDDED_CONF) == "true"


def delta_spark_available(spark: SparkSession) -> bool:
    """True when Delta Lake's engine runs in ``spark``: Delta's SQL extension is configured (or the
    platform is Databricks, where Delta is built in) and, on a classic session, its classes load.

    Never downloads anything, and needs no Python package: the delta-spark engine speaks SQL. On
    Spark Connect there is no JVM to ask, so the session's configuration answers.
    """
    extensions = conf_value(spark, "spark.sql.extensions") or ""
    databricks = bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))
    if "DeltaSparkSessionExtension" not in extensions and not databricks:
        return False
    if is_spark_connect(spark):
        return True
    try:
        from py4j.java_gateway import JavaClass

        # py4j loads through Spark's class loader, which holds spark.jars (Class.forName does not)
        return isinstance(jvm(spark).org.apache.spark.sql.delta.DeltaLog, JavaClass)
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False
