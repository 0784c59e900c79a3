"""Oracle GoldenGate for Big Data Avro: row-modeled (``avro_row``) and operation-modeled (``avro_op``).

Every message is one operation, an Avro record whose schema GoldenGate writes per table to
``<schemaDirectory>/<CATALOG.SCHEMA.TABLE>.avsc`` (namespace = ``CATALOG.SCHEMA``, name =
``TABLE``). Both formats start with the metadata fields ``table``, ``op_type``, ``op_ts``,
``current_ts``, ``pos``, ``primary_keys`` (array) and ``tokens`` (map), then:

* **row** (``ogg-avro-row``): one nullable field per column. Avro cannot say *missing*, so every
  column is present (a value or NULL). Insert and update carry the after image, delete the
  before image, truncate none (its column fields are all null and are ignored).
* **op** (``ogg-avro-op``): nullable ``before`` and ``after`` records of the table's columns, each
  column ``COL`` followed by a boolean ``COL_isMissing``. ``COL_isMissing`` true: the column is
  missing (left out of the image); false with a value: present; false with null: NULL.

Inputs, told apart per file:

* **Object Container Files** (start with ``Obj\\x01``; GoldenGate's OCF formatter, HDFS): the
  schema is in the file header, every codec of :mod:`lakecdc.decode.avro.containers` is read. Large
  files are split at block boundaries and read in parallel.
* **Files of single messages**, each decoded with the per-table ``.avsc`` of ``schemaDirectory``.
  Framing (lakecdc option ``framing``): ``length-prefixed`` (default: each message preceded by
  its length as 4 bytes big-endian, what a Kafka dump tool writes), ``delimited`` (each message
  followed by GoldenGate's ``lineDelimiter``; implied when ``lineDelimiter`` is set) or ``single``
  (the whole file is one message). ``lineDelimiter`` accepts ``CDATA[...]`` and the Java
  properties escapes ``\\n``, ``\\r``, ``\\t``, ``\\\\``, ``\\uXXXX``. A delimited file is cut where
  a message *decodes* up to a delimiter, so a delimiter byte sequence inside a message does not
  split it; a message that decodes nowhere runs to the next delimiter and is quarantined.
  Empty segments (two delimiters in a row) are skipped.
* **kcat -J dumps of a topic** (GoldenGate's Kafka handler publishes one message per record; a
  file whose first character is ``{``, or ``framing=kcat``): one JSON line per record with its
  ``payload`` (the message) base64-encoded, what ``kcat -J`` writes with a base64 deserialiser and
  what :func:`lakecdc.apply` lands from Kafka topics. A record without a value (a tombstone) is
  quarantined with that reason.
* **Which schema version.** After a metadata change the table's schema changes and older
  messages must be read with the version that wrote them (GoldenGate ``versionSchemas=true``
  keeps ``<table>_<timestamp>.avsc`` copies). A plain message names its table in its first field,
  so the decoder tries that table's versions newest first (``<table>.avsc``, then the
  timestamped copies by descending name) and takes the first that decodes the message to exactly
  its last byte (to the delimiter, when delimited): an older message lacks the bytes a newer
  schema's added column needs, and a newer message has bytes an older schema leaves over.
* **Generic wrapper** (``wrapMessageInGenericAvroMessage=true``): every message is an
  ``oracle.goldengate.generic_wrapper`` record ``{table_name, schema_fingerprint, payload}``; the
  fingerprint (Avro's 64-bit parsing fingerprint, see :func:`~lakecdc.decode.avro.schemas.
  parsing_fingerprint`) picks the schema version exactly, from the fingerprints of every
  ``.avsc`` of ``schemaDirectory``. An OCF file whose schema is the wrapper is unwrapped too.

Values become exact text as :func:`lakecdc.decode.avro.text.text_converter` describes (double
``17520.0`` stays ``17520.0``, decimals exactly, bytes base64, nested values JSON). Column types
(:meth:`column_types`) come from the schemas: ``long`` bigint, ``int`` int, ``double``/``float``
double, ``boolean``, ``string``, ``decimal(p,s)`` exactly, anything else string (GoldenGate date
strings such as ``1994-09-30:15:33:00`` are Avro strings and stay strings). When several schemas
describe a table, the newest version wins, then OCF headers in file order.

A message that cannot be read (truncated, no schema for its table, decodes with none of the
table's versions, unknown fingerprint, corrupt OCF block) does not stop the batch: its row
carries ``_error``, ``_offset`` and ``_raw`` (the message's bytes, base64), and goes to the
quarantine. ``_offset`` is the byte offset of the message's length prefix (length-prefixed), of
its first byte (delimited, single), or of its OCF block (OCF; ``_row`` numbers the records).

Options are the formatters' property names (without ``gg.handler.<name>.format.``):
``insertOpKey``/``updateOpKey``/``deleteOpKey``/``truncateOpKey`` (I/U/D/T),
``schemaDirectory`` (``./dirdef``), ``wrapMessageInGenericAvroMessage`` (false),
``lineDelimiter`` (none), ``encoding`` of the ``.avsc`` files (UTF-8),
``treatAllColumnsAsStrings`` (false: every column typed as string), and lakecdc's ``framing``,
``maxBlockBytes`` and ``maxBlockRecords`` (an OCF block's limits: :class:`~lakecdc.decode.avro.containers.BlockLimits`).
``pkUpdateHandling`` (abend): a row formatter with ``delete-insert`` writes a key change as a
delete and an insert at the same ``op_ts`` and ``pos``; told so, ``ogg-avro-row`` joins each such
pair into the key change it was (:func:`~lakecdc.decode.goldengate.common.rejoin_split_key_changes`),
applied by ``pk_update`` as for op-modeled formats (with ``update`` or ``abend`` there is nothing
to join; the op format shows key changes itself). ``versionSchemas``, ``iso8601Format``,
``generateSchema`` and ``schemaFilePath`` are accepted: they change how GoldenGate writes, and
the reader copes with each outcome.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.avro.containers import (
    LIMIT_OPTIONS,
    BlockLimits,
    is_ocf,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.decode.avro.schemas import SchemaDirectory, full_name, load_schema_directory, parsing_fingerprint
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import bad_time, blank_as_null, missing, op_missing, unknown_op
from lakecdc.decode.event import Parts
from lakecdc.decode.files.splits import Split, split_bytes, splits_frame
from lakecdc.decode.goldengate.avro_layout import (
    DECODED_SCHEMA,
    WRAPPER_NAME,
    WRAPPER_SCHEMA,
    AvroReader,
    Kind,
    Layout,
)
from lakecdc.decode.goldengate.common import (
    GG_NAMES,
    OP_KEY_OPTIONS,
    PK_UPDATE_OPTION,
    ROW_IMAGES,
    java_unescape,
    op_table,
    rejoin_split_key_changes,
)
from lakecdc.decode.kafka.dumps import length_prefixed_splits
from lakecdc.decode.rows import rows_parts
from lakecdc.decode.spec import Images, Option, Ordering, VendorSpec
from lakecdc.decode.times import parse_op_ts
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FRAMINGS = ("length-prefixed", "delimited", "single", "kcat")
_MAX_TASKS = 256
_OPTIONS = (
    *OP_KEY_OPTIONS,
    Option("schemaDirectory", "./dirdef"),
    Option("wrapMessageInGenericAvroMessage", "false", "flag"),
    Option("lineDelimiter", ""),
    Option("framing", ""),
    Option("encoding", "UTF-8"),
    Option("treatAllColumnsAsStrings", "false", "flag"),
    PK_UPDATE_OPTION,
    *[Option(name, default) for name, default in LIMIT_OPTIONS.items()],
)
_IGNORED = frozenset({"versionSchemas", "iso8601Format", "generateSchema", "schemaFilePath", "format"})


def is_kcat_json(path: str) -> bool:
    """Whether the file at ``path`` is a kcat ``-J`` dump: its first non-blank byte is ``{``. (A
    GoldenGate Avro message never starts so: its first field is a string whose length, a zigzag
    varint, would be negative; a length prefix would announce over 2 GB.)"""
    with open(path, "rb") as fh:
        return fh.read(256).lstrip().startswith(b"{")


def _spec(name: str, images: Images) -> VendorSpec:
    # seq: default_seq(op_ts, pos, 0), from the rows (rows_parts)
    return VendorSpec(name=name, ops=op_table(name), images=images, ordering=Ordering("given"), names=GG_NAMES,
                      options=_OPTIONS, ignored=_IGNORED, binary=True)


OGG_AVRO_ROW = _spec("ogg-avro-row", ROW_IMAGES)
OGG_AVRO_OP = _spec("ogg-avro-op", Images())


@dataclass(frozen=True)
class Plan:
    """What the driver found before decoding: the splits and the schema directory."""

    splits: list[Split]
    schemas: SchemaDirectory | None


class OggAvroDecoder(Decoder):
    """GoldenGate Avro messages (row or op modeled) to canonical change events."""

    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)
    KAFKA_RECORDS = "kcat-base64"  # (GoldenGate's Kafka handler: a topic's values are single messages)
    kind: ClassVar[Kind] = "op"

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        o = self.options
        try:
            codecs.lookup(o["encoding"])
        except LookupError:
            raise ConfigError(f"{self.name}: encoding {o['encoding']!r} is not known") from None
        self.delimiter = java_unescape(o["lineDelimiter"]).encode("utf-8")
        framing = o["framing"].strip().lower() or ("delimited" if self.delimiter else "length-prefixed")
        if framing not in FRAMINGS:
            raise ConfigError(f"{self.name}: framing {o['framing']!r} is not one of {', '.join(FRAMINGS)}")
        if framing == "delimited" and not self.delimiter:
            raise ConfigError(f"{self.name}: framing 'delimited' needs lineDelimiter (the bytes after each message)")
        self.framing = framing
        self.ops = self.spec.op_table(o)
        self.wrapped = self.flag("wrapMessageInGenericAvroMessage")
        self.all_strings = self.flag("treatAllColumnsAsStrings")
        # a row formatter splits a key change into a delete and an insert: join them again
        self.rejoin = self.kind == "row" and o["pkUpdateHandling"] == "delete-insert"
        self._schemas: SchemaDirectory | None = None
        self.limits = BlockLimits.of(self.name, self.options)

    # -- planning (driver)
    def schema_directory(self, *, required: bool) -> SchemaDirectory | None:
        """The ``schemaDirectory``'s schemas (read once); None when absent and not required."""
        if self._schemas is None:
            path = self.options["schemaDirectory"]
            if not os.path.isdir(path):
                if required:
                    raise ConfigError(
                        f"{self.name}: schemaDirectory {path!r} does not exist; files of single Avro "
                        "messages are decoded with their table's .avsc from it (set schemaDirectory)"
                    )
                return None
            try:
                self._schemas = load_schema_directory(path, encoding=self.options["encoding"])
            except ValueError as exc:
                raise ConfigError(f"{self.name}: {exc}") from None
        return self._schemas

    def plan(self, files: Sequence[str], parallelism: int = 1) -> list[Split]:
        """Splits of the inputs: OCF files by blocks, length-prefixed message files at messages,
        other message files whole; ``.avsc`` files skipped. Splits are about the inputs' size over
        ``parallelism`` (at least 4 MB, at most 128 MB), so the cores share the decoding."""
        paths = [p for p in files if not p.endswith(".avsc")]
        size_of = split_bytes(sum(os.path.getsize(p) for p in paths), parallelism, policy="share")
        out: list[Split] = []
        for path in paths:
            size = os.path.getsize(path)
            if size >= 4 and is_ocf(path):
                try:
                    _header, splits = plan_ocf_splits(path, size_of, self.limits)
                except (ValueError, OSError) as exc:
                    out.append(Split(path, "bad", 0, size, 0, note=f"OCF file header: {exc}"))
                    continue
                out += [Split(path, "ocf", s, s + n, r, limits=self.limits) for s, n, r in splits]
            elif self.framing == "kcat" or is_kcat_json(path):
                out.append(Split(path, "kcat", 0, size, 0))
            elif self.framing == "length-prefixed":
                out += [Split(path, "messages", s, e, r) for s, e, r in length_prefixed_splits(path, size_of)]
            else:
                out.append(Split(path, "messages", 0, size, 0))
        return out

    def prepare(self, ctx: Context, inputs: Sequence[str]) -> Context:
        """The splits (:meth:`plan`) and, when a split holds single messages, the schema directory."""
        splits = self.plan(inputs, default_parallelism(ctx.spark))
        schemas = self.schema_directory(required=any(s.kind in ("messages", "kcat") for s in splits))
        return replace(ctx, state=Plan(splits, schemas))

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The messages decoded in the executors (rows of
        :data:`~lakecdc.decode.goldengate.avro_layout.DECODED_SCHEMA`), with ``op_ts`` parsed
        (``_op_ts``)."""
        plan = ctx.state
        assert isinstance(plan, Plan)
        reader = AvroReader(self.kind, self.framing, self.delimiter, self.wrapped, plan.schemas, self.limits,
                            ops=dict(self.ops.ops))
        decoded = splits_frame(ctx.spark, plan.splits, reader, DECODED_SCHEMA, max_tasks=_MAX_TASKS)
        return decoded.select("*", parse_op_ts(F.col("x_op_ts_text"), utc_session=ctx.utc).alias("_op_ts"))

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        op, op_text, op_ts = F.col("x_op"), F.col("x_op_text"), F.col("_op_ts")
        names = self.spec.names
        checks = [
            missing(blank_as_null(F.col("x_table")), names.table),
            op_missing(op_text, names.op),
            unknown_op(op_text, op.isNotNull(), self.ops, names.op),
            bad_time(op_ts, F.col("x_op_ts_text"), names.op_ts),
        ]
        if self.kind == "op":
            for op_value, image in (("I", "after"), ("U", "after"), ("D", "before")):
                checks.append(((op == op_value) & F.col(f"x_{image}").isNull(), F.format_string(
                    f"'{image}' is null for {names.op} '%s' (expected a record)", op_text)))
        return rows_parts(parsed, op_ts=op_ts, ordered=F.lit(False), checks=checks)

    def finish(self, events: DataFrame, ctx: Context) -> DataFrame:
        """``ogg-avro-row`` with ``pkUpdateHandling=delete-insert``: split key changes joined again."""
        return rejoin_split_key_changes(events) if self.rejoin else events

    # -- types
    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types from the schema directory (newest version wins), then OCF headers."""
        out: dict[str, dict[str, T.DataType]] = {}
        dirs = self.schema_directory(required=False)
        if dirs is not None:
            for table, versions in dirs.by_table.items():
                for sf in reversed(versions):
                    out.setdefault(table, {}).update(Layout.of(sf.schema, self.kind, sf.file).types)
        for path in files:
            if path.endswith(".avsc") or os.path.getsize(path) < 4 or not is_ocf(path):
                continue
            with open(path, "rb") as fh:
                try:
                    schema = read_ocf_header(fh).schema
                except ValueError:
                    continue  # the file's records are quarantined by read()
            named = full_name(schema)
            if named and named != WRAPPER_NAME:
                out.setdefault(named, {}).update(Layout.of(schema, self.kind, path).types)
        return out


class OggAvroRowDecoder(OggAvroDecoder):
    """GoldenGate ``avro_row``: one nullable field per column; missing reads as NULL."""

    spec = OGG_AVRO_ROW
    kind: ClassVar[Kind] = "row"


class OggAvroOpDecoder(OggAvroDecoder):
    """GoldenGate ``avro_op``: ``before``/``after`` records with ``COL_isMissing`` flags."""

    spec = OGG_AVRO_OP
    kind: ClassVar[Kind] = "op"


__all__ = [
    "FRAMINGS", "OGG_AVRO_OP", "OGG_AVRO_ROW", "WRAPPER_SCHEMA", "OggAvroDecoder", "OggAvroOpDecoder",
    "OggAvroRowDecoder", "Plan", "parsing_fingerprint",
]
