"""lakecdc: change streams from GoldenGate, Debezium, DTS and Qlik, merged exactly once into Delta.

The data's path, module by module: :mod:`lakecdc.decoders` (vendor formats to canonical events),
:mod:`lakecdc.changes.events` (the canonical event, ops- and rows-style), :mod:`lakecdc.consolidate.fold`
(one net action per key), :mod:`lakecdc.merge` (one MERGE plan, two Delta engines), and
:mod:`lakecdc.apply` which runs them exactly once per input (:mod:`lakecdc.streaming`: the same as
a Structured Streaming query over a landing directory); then :mod:`lakecdc.maintain` keeps the
tables fast (compaction, Z-order, vacuum, checkpoints).

Example (a notebook with a ``spark`` session)::

    import lakecdc
    summary = lakecdc.apply("landing/", "lake/", format="ogg-json",
                            keys={"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_ID"]}, spark=spark)
    print(summary.render())
"""

# first: a missing or unsupported PySpark is refused in one line before any module needs it
from lakecdc.spark.versions import PYSPARK as _PYSPARK  # noqa: F401

# isort: split
from lakecdc.apply import apply, read_changes, read_table
from lakecdc.changes.events import to_ops, to_rows
from lakecdc.doctor import TargetDamaged
from lakecdc.errors import (
    CommitConflict,
    ConfigError,
    DecodeError,
    InputChangedError,
    LakecdcError,
    MissingKeyError,
    PrimaryKeyUpdateError,
    UnknownFormatError,
)
from lakecdc.lease import TargetBusy
from lakecdc.maintain import MaintenanceReport, maintain
from lakecdc.spark.session import get_spark
from lakecdc.streaming import BatchFailed, ChangeStream, StreamBatch, stream
from lakecdc.summary import RunSummary, TableSummary

__version__ = "0.1.0"

__all__ = [
    "BatchFailed",
    "ChangeStream",
    "CommitConflict",
    "ConfigError",
    "DecodeError",
    "InputChangedError",
    "LakecdcError",
    "MaintenanceReport",
    "MissingKeyError",
    "PrimaryKeyUpdateError",
    "RunSummary",
    "StreamBatch",
    "TableSummary",
    "TargetBusy",
    "TargetDamaged",
    "UnknownFormatError",
    "apply",
    "get_spark",
    "maintain",
    "read_changes",
    "read_table",
    "stream",
    "to_ops",
    "to_rows",
]
