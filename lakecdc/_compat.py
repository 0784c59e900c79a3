"""The only place that looks for optional engines: delta-spark's JVM classes, Spark Connect."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakecdc.session import conf_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_spark_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session, which has no JVM handle to look into."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def delta_spark_available(spark: SparkSession) -> bool:
    """True when Delta Lake's JVM classes and its Python package can be used from ``spark``.

    Never downloads anything. On Spark Connect there is no JVM to ask, so the answer comes from the
    session's configuration (``spark.sql.extensions`` naming Delta) instead.
    """
    try:
        import delta  # noqa: F401  (the delta-spark Python package)
    except ImportError:
        return False
    if is_spark_connect(spark):
        extensions = conf_value(spark, "spark.sql.extensions") or ""
        return "DeltaSparkSessionExtension" in extensions
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception:  # py4j raises its own error types for a missing class
        return False
    return True
