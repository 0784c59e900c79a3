"""What every decoder shares: options, the record flow, and how a bad record is marked.

A vendor module subclasses :class:`Decoder`, names its options with their defaults, and writes
only :meth:`Decoder.decode`: raw records in, canonical change events out (see
:mod:`lakecdc.changes.events`). A record that cannot be decoded is not dropped and does not stop the
batch: the decoder sets ``_error`` to a reason a person can act on and keeps ``_raw``; the
pipeline sends such rows to the quarantine table and applies the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.errors import ConfigError
from lakecdc.spark.conf import conf_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def unwrap_cdata(value: str) -> str:
    """GoldenGate property values may be wrapped as ``CDATA[...]`` to keep whitespace."""
    if value.startswith("CDATA[") and value.endswith("]"):
        return value[len("CDATA[") : -1]
    return value


class Decoder(ABC):
    """Base of every format decoder.

    Subclasses set :attr:`name` (the registry key, e.g. ``ogg-json``), :attr:`OPTIONS` (option
    name to default, as strings, the way a properties file gives them) and implement
    :meth:`decode`.
    """

    name: ClassVar[str]
    OPTIONS: ClassVar[Mapping[str, str]] = {}
    #: Options accepted for compatibility that do not change how lakecdc reads the data.
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        given = dict(options or {})
        unknown = sorted(set(given) - set(self.OPTIONS) - self.IGNORED_OPTIONS)
        if unknown:
            known = ", ".join(sorted({*self.OPTIONS, *self.IGNORED_OPTIONS}))
            raise ConfigError(f"{self.name}: unknown option(s) {', '.join(unknown)}; known: {known}")
        self.options: dict[str, str] = {
            k: unwrap_cdata(str(v)) for k, v in {**self.OPTIONS, **given}.items()
        }

    def flag(self, name: str) -> bool:
        value = self.options[name].strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ConfigError(f"{self.name}: option {name}={self.options[name]!r} is not true/false")

    #: True when every column is to be typed as a string (GoldenGate ``treatAllColumnsAsStrings``).
    all_strings: bool = False

    #: The format carries transaction metadata (BEGIN/END markers with event counts) that
    #: ``complete_transactions`` needs (see :mod:`lakecdc.changes.transactions`).
    TRANSACTION_MARKERS: ClassVar[bool] = False

    #: One message per line (``\n``): a file that grows after it was applied can be read on from
    #: its new complete lines (see :meth:`lakecdc.run.ledger.Ledger.plan`).
    LINES: ClassVar[bool] = False

    @property
    def appendable(self) -> bool:
        """Whether the new lines appended to a file can be decoded on their own."""
        return self.LINES

    #: Each record is decoded by Python in the executors (fastavro, an XML parser, ...): a second
    #: pass over the events costs more than Spark's cache, so ``apply`` caches them even for one
    #: table (whose events it otherwise decodes twice: once to profile them, once to fold them).
    PYTHON_ROWS: ClassVar[bool] = False

    def rows_in_python(self) -> bool:
        """Whether the records of the last :meth:`read` are decoded in Python (see PYTHON_ROWS)."""
        return self.PYTHON_ROWS

    #: A directory kept across the runs into one target (``<target>/_lakecdc/decoders/<name>``), set
    #: by :func:`lakecdc.apply` before :meth:`read`; None when decoding without a target
    #: (:func:`lakecdc.read_changes`). A format whose messages depend on earlier ones (Qlik's metadata
    #: messages describe the data messages of later runs) keeps what it learnt here. Writes must be
    #: idempotent: a run that crashes is decoded again.
    state_dir: str | None = None

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types the input declares (Avro schemas, schema files, a data contract), per table.

        Only columns listed here take these types; the pipeline infers the others with
        :meth:`variant_images` when the decoder has it, else types them as strings.
        """
        return {}

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame | None:
        """``table``, ``before``, ``after`` as ``map<string, variant>`` (the values' JSON types), for
        type inference; None when the format's values carry no type (plain text)."""
        return None

    @abstractmethod
    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """Decode ``files`` into canonical events plus ``_error`` (NULL for good records).

        Must run inside :func:`lakecdc.decoders._records.exact_json_strings` for JSON formats.
        ``staging`` is a scratch directory the decoder may write normalised copies into.
        """


def first_error(*checks: tuple[Column, Column | str]) -> Column:
    """The reason of the first failing check, NULL when all pass.

    Each check is ``(condition_that_means_bad, reason)``; reasons may be columns so that they can
    quote the offending value.
    """
    out: Column | None = None
    for bad, reason in checks:
        reason_col = F.lit(reason) if isinstance(reason, str) else reason
        out = F.when(bad, reason_col) if out is None else out.when(bad, reason_col)
    assert out is not None
    return out.otherwise(F.lit(None).cast("string"))


#: Names of the UTC zone a session may give (``spark.sql.session.timeZone``).
UTC_ZONES = frozenset({"UTC", "ETC/UTC", "Z", "GMT", "ETC/GMT", "UCT", "ETC/UCT", "ZULU", "ETC/ZULU",
                       "UNIVERSAL", "ETC/UNIVERSAL", "+00:00", "GMT0", "ETC/GMT0", "ETC/GMT+0", "ETC/GMT-0"})


def session_is_utc(spark: SparkSession) -> bool:
    """Whether ``spark`` reads a time without a zone as UTC (its session time zone is UTC, as in
    lakecdc's own sessions). A cast takes the zone when its DataFrame is made, not when it runs."""
    return (conf_value(spark, "spark.sql.session.timeZone") or "").strip().upper() in UTC_ZONES


def parse_op_ts(text: Column, *, utc_session: bool = False) -> Column:
    """A source timestamp string (``2015-11-05 18:45:36.000000`` or ISO-8601) read as UTC.

    A string without a zone is read as UTC explicitly (``Z`` appended), so a notebook whose
    session time zone differs still reads the same instant; a string with its own zone keeps it.
    With ``utc_session`` (:func:`session_is_utc` of the session making the DataFrame) the string
    is cast as it is: the session reads a time without a zone as UTC already, and the ``Z`` would
    cost a zone lookup per value.
    """
    if utc_session:
        return text.try_cast("timestamp")
    return F.coalesce(F.concat(text, F.lit("Z")).try_cast("timestamp"), text.try_cast("timestamp"))
