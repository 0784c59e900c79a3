"""What every decoder shares: options, the record flow, and how a bad record is marked.

A vendor module subclasses :class:`Decoder` and states its format as a
:class:`~lakecdc.decode.spec.VendorSpec` (``spec``); the base flow (:meth:`Decoder.read`) then
reads the files, asks the vendor what each parsed record is (:meth:`Decoder.parts`) and makes the
canonical change events of it with the one projection, :func:`lakecdc.decode.event.project` (see
:mod:`lakecdc.changes.events` for the columns). A record that cannot be decoded is not dropped and
does not stop the batch: its ``_error`` is a reason a person can act on; the pipeline sends such
rows to the quarantine table and applies the rest.

Decoders not yet on a spec set :attr:`Decoder.OPTIONS` and override :meth:`Decoder.read` whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import types as T

from lakecdc.changes.events import last_wins
from lakecdc.decode.event import Parts, empty_events, project
from lakecdc.decode.spec import VendorSpec, flag_value, parse_options
from lakecdc.decode.times import session_is_utc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Context:
    """One :meth:`Decoder.read`: its session, its scratch directory and the session's settings
    that decide how a plan is written (read when the plan is made, so the plan must run under
    them): ``last_win`` (:func:`lakecdc.changes.events.last_wins`) and ``utc``
    (:func:`lakecdc.decode.times.session_is_utc`). ``state``: what :meth:`Decoder.prepare` found.
    ``files``: every file :meth:`Decoder.read` was given, :meth:`Decoder.inputs` or not (schema
    files among them name a format's columns)."""

    spark: SparkSession
    staging: str
    last_win: bool
    utc: bool
    state: object = None
    files: tuple[str, ...] = ()


class Decoder:
    """Base of every format decoder.

    A decoder on the base flow sets :attr:`spec` (its name, options and the rest come from it) and
    writes :meth:`parse` and :meth:`parts`, and :meth:`prepare`, :meth:`inputs` or :meth:`finish`
    when it needs them. A decoder not yet on it sets :attr:`name`, :attr:`OPTIONS` (option name to
    default, as strings, the way a properties file gives them) and overrides :meth:`read`.
    """

    #: The format, for decoders on the base flow (an instance may narrow it by its options).
    spec: VendorSpec
    #: The registry key, e.g. ``ogg-json``.
    name: ClassVar[str]
    OPTIONS: ClassVar[Mapping[str, str]] = {}
    #: Options accepted for compatibility that do not change how lakecdc reads the data.
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:
            cls.name = spec.name
            cls.OPTIONS = {o.name: o.default for o in spec.options}
            cls.IGNORED_OPTIONS = spec.ignored
            cls.LINES = spec.lines
            cls.TRANSACTION_MARKERS = spec.transaction_markers

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        kinds = self.spec.options if hasattr(type(self), "spec") else ()
        self.options: dict[str, str] = parse_options(self.name, self.OPTIONS, self.IGNORED_OPTIONS, options, kinds)

    def flag(self, name: str) -> bool:
        """The option ``name`` as true/false (:class:`~lakecdc.errors.ConfigError` when it is neither)."""
        return flag_value(self.name, name, self.options[name])

    #: True when every column is to be typed as a string (GoldenGate ``treatAllColumnsAsStrings``).
    all_strings: bool = False

    #: The format carries transaction metadata (BEGIN/END markers with event counts) that
    #: ``complete_transactions`` needs (see :mod:`lakecdc.changes.transactions`).
    TRANSACTION_MARKERS: ClassVar[bool] = False

    #: One message per line (``\n``): a file that grows after it was applied can be read on from
    #: its new complete lines (see :meth:`lakecdc.lake.ledger.Ledger.plan`).
    LINES: ClassVar[bool] = False

    @property
    def appendable(self) -> bool:
        """Whether the new lines appended to a file can be decoded on their own."""
        return self.LINES

    #: How a Kafka record of this format is landed as a line of a file this decoder reads
    #: (:data:`lakecdc.run.kafka.FRAMINGS`): ``values`` (the value's text, for messages that name
    #: their table and position themselves), ``kcat-text`` / ``kcat-base64`` (a ``kcat -J`` line:
    #: topic, partition, offset, timestamp, key and value as text, or base64 for binary messages);
    #: None: the format is not read from Kafka.
    KAFKA_RECORDS: ClassVar[str | None] = None

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

    # -- the flow --------------------------------------------------------------------------------
    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """Decode ``files`` into canonical events plus ``_error`` (NULL for good records).

        Must run inside :func:`lakecdc.decode.files.lines.exact_json_strings` for JSON formats.
        ``staging`` is a scratch directory the decoder may write normalised copies into.
        """
        inputs = self.inputs(files)
        if not inputs:
            return empty_events(spark, binary=self.spec.binary)
        ctx = Context(spark, staging, last_win=last_wins(spark), utc=session_is_utc(spark), files=tuple(files))
        ctx = self.prepare(ctx, inputs)
        parsed = self.parse(ctx, inputs)
        events = project(parsed, self.parts(parsed, ctx), self.spec)
        return self.finish(events, ctx)

    def inputs(self, files: Sequence[str]) -> list[str]:
        """The files that hold records (a format may take schema files or sidecars among them)."""
        return list(files)

    def prepare(self, ctx: Context, inputs: Sequence[str]) -> Context:
        """What the driver learns before parsing (schemas, a registry, a catalog), in ``ctx.state``."""
        return ctx

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The records of ``inputs`` parsed, one row each, with ``_file``, ``_block`` and ``_row``."""
        raise NotImplementedError(f"{self.name}: parse")

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        """What each parsed record is (:class:`~lakecdc.decode.event.Parts`), as columns of ``parsed``."""
        raise NotImplementedError(f"{self.name}: parts")

    def finish(self, events: DataFrame, ctx: Context) -> DataFrame:
        """The events after the projection (e.g. split key changes joined again)."""
        return events


__all__ = ["Context", "Decoder"]
