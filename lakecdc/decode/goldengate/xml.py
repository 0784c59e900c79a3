"""Oracle GoldenGate for Big Data XML, operation-modeled (``gg.handler.<name>.format=xml``).

One XML document per operation (seed 000, section 13.5)::

    <?xml version='1.0' encoding='UTF-8'?>
    <operation table='GG.TCUSTORD' type='U' ts='2013-06-02 22:14:41.000000'
               current_ts='2015-10-06T12:21:50.413000' pos='00000000000000002891' numCols='7'>
     <col name='PRODUCT_PRICE' index='4'>
       <before><![CDATA[15000.00]]></before>
       <after><![CDATA[14000.00]]></after>
     </col>
     <col name='PRODUCT_AMOUNT' index='5'>
       <missing/>
     </col>
     <tokens><token><Name><![CDATA[R]]></Name><Value><![CDATA[AADPkvAAEAAEqLzAAA]]></Value></token></tokens>
    </operation>

``operation`` attributes: ``table`` (fully qualified name), ``type`` (``insertOpKey`` ...
``truncateOpKey``, defaults I/U/D/T), ``ts`` (the source commit time, ``op_ts``), ``current_ts``
(formatter wall clock, ISO-8601 or with a blank instead of ``T`` when ``iso8601Format=false``;
kept in ``source``, never used for ordering), ``pos`` (20-digit trail position, kept as text),
``numCols`` (kept in ``source``). One ``col`` (``name``, ``index``) per column holds a
``before`` and/or ``after`` element; ``tokens`` become ``source['token.<Name>']``.

The three column states, per image:

* **missing**: the ``col`` has no ``before`` (``after``) element, the element carries
  ``missing='true'``, or the ``col`` holds ``<missing/>`` (missing in both images);
* **NULL**: the element carries ``isNull='true'`` (the seed shows no NULL; this is the marker
  lakecdc reads, any letter case of the attribute name);
* **a value**: the element's text, exactly (CDATA or escaped text, both as an XML parser reports
  them: ``&lt;`` is ``<``; a value split over several CDATA sections, as a writer must do for
  ``]]>``, is joined). An **empty element** (``<after/>``, ``<after></after>``,
  ``<after><![CDATA[]]></after>``) is the **empty string**: the XSD types the content as
  ``xs:string`` and the format marks missing and NULL explicitly, so emptiness cannot stand for
  either, and reading it as NULL would lose a value the source had.

Op-modeled: insert = after only, update = before and after, delete = before only, truncate =
neither (whatever ``col`` elements it carries are ignored). An image with no present column is a
NULL image; an insert or update without any ``after`` value and a delete without any ``before``
value are bad records. The format carries no primary keys (``keys`` is NULL: configure them) and
no transaction id.

Types: XML carries text only, so values stay the exact text (``17520.00`` stays ``17520.00``,
``1994-09-30:15:33:00`` stays a string) and new columns are typed as strings; a target table's
existing column types (or a data contract) still apply.

Reading, in two passes:

1. **staging** (driver, one sequential pass per file): the file is decoded (the encoding named
   by the first ``<?xml ... encoding=...?>`` prolog, else the ``encoding`` option) and split
   into one document per operation, with or without prologs between them (``includeProlog``).
   Each document is written as one line of a staged file, ``\\``, newline and carriage return
   escaped as ``\\\\``, ``\\n``, ``\\r`` (and a byte the encoding cannot decode as ``\\xHH``),
   with a ``.lines.json`` sidecar giving each document's first line in the original file. A
   quarantined record's raw text is this escaped line.
2. **parsing** (Spark executors, ``mapInArrow``): each document is parsed with ``defusedxml``
   with DTDs forbidden, so no DOCTYPE, entity declaration or external reference is ever
   processed (no file or URL is read, no entity expanded: billion laughs and quadratic blowup
   stop at the DOCTYPE). Such a record is quarantined with ``XML DOCTYPE/entities are not
   allowed: ...``; a malformed one with ``not well-formed XML: ...``; the rest of the file
   applies.

Options are the formatter's property names (without ``gg.handler.<name>.format.``):
``insertOpKey``/``updateOpKey``/``deleteOpKey``/``truncateOpKey`` (I/U/D/T), ``encoding``
(UTF-8; any encoding Python knows by the Java name, e.g. ``ISO-8859-1``), ``includeProlog``
(false) and ``iso8601Format`` (true): the last two are checked to be true/false but do not change
reading (prologs and both ``current_ts`` forms are always accepted). ``format`` is accepted and
ignored.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple
from xml.etree import ElementTree

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import unknown_op
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import read_lines
from lakecdc.decode.files.staging import Splitter, on_executors, stage
from lakecdc.decode.goldengate.common import OP_KEY_OPTIONS, op_table
from lakecdc.decode.rows import ROW_SCHEMA, Pairs, RecordError, rows_parts
from lakecdc.decode.spec import Names, Option, Ordering, VendorSpec
from lakecdc.decode.times import parse_op_ts
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from pyspark.sql import DataFrame, SparkSession

ROOT = "operation"
_MAP = pa.map_(pa.string(), pa.string())
#: The parsed operations: :data:`~lakecdc.decode.rows.ROW_SCHEMA`'s rows (``x_op`` the canonical op
#: of the ``type`` attribute, NULL when the op table has no such text), plus the ``type`` and ``ts``
#: attributes as written (``x_op_text``, ``x_op_ts_text``: checked and parsed in SQL).
PARSED_SCHEMA = T.StructType([*ROW_SCHEMA.fields, T.StructField("x_op_text", T.StringType()),
                              T.StructField("x_op_ts_text", T.StringType())])

OGG_XML = VendorSpec(
    name="ogg-xml",
    ops=op_table("ogg-xml"),
    ordering=Ordering("given"),  # default_seq(op_ts, pos, 0), from the rows (rows_parts)
    names=Names(table="table", op="type", op_ts="ts"),
    options=(
        *OP_KEY_OPTIONS,
        Option("encoding", "UTF-8"),
        Option("includeProlog", "false", "flag"),
        Option("iso8601Format", "true", "flag"),
    ),
    ignored=frozenset({"format"}),
)

# -- staging: one operation per line ------------------------------------------------------------

# XML allows no '<' inside a tag, quoted or not: an unclosed quote cannot run into the next tags
_TAG = re.compile(r"""<(/?)([^\s/>!?<"']+)(?:[^>"'<]|"[^"<]*"|'[^'<]*')*>""")
_XML_DECL = re.compile(r"<\?xml\s")
_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_SKIP = (("<!--", "-->"), ("<![CDATA[", "]]>"), ("<?", "?>"))


def split_operations(text: str) -> Iterator[tuple[int, str]]:
    """Split a stream of XML documents; yield ``(first line, document)`` per document.

    A document is everything from its first non-blank character (a prolog, a DOCTYPE, the root
    element) to the end of its root element. A new ``<?xml`` prolog, or an ``<operation`` start
    tag inside an unfinished one, starts the next document, so a truncated operation does not
    swallow the ones after it. Text that does not start with ``<`` is yielded up to the end of
    its line (or the next ``<``), so the caller reports it as a bad record instead of losing it.
    """
    i, n, line, counted = 0, len(text), 1, 0
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            return
        line += text.count("\n", counted, i)
        counted = i
        if text[i] == "<":
            end = _document_end(text, i)
        else:
            stops = [p for p in (text.find("\n", i), text.find("<", i)) if p >= 0]
            end = min(stops) if stops else n
        yield line, text[i:end].rstrip()
        i = end


_CLOSE_ROOT = f"</{ROOT}>"


def _plain_end(text: str, start: int) -> int | None:
    """The common case fast: an ``<operation`` element up to the first ``</operation>``, with no
    other operation, prolog, comment or DOCTYPE in between and its CDATA sections closed; else
    None (then :func:`_document_end` walks the tags)."""
    if not text.startswith(f"<{ROOT}", start):
        return None
    close = text.find(_CLOSE_ROOT, start)
    if close < 0:
        return None
    end = close + len(_CLOSE_ROOT)
    piece = text[start:end]
    if piece.count(f"<{ROOT}") != 1 or "<!--" in piece or "<?" in piece or "<!D" in piece:
        return None
    if piece.count("<![CDATA[") != piece.count("]]>"):
        return None
    return end


def _document_end(text: str, start: int) -> int:
    """Where the document starting at ``start`` ends (exclusive)."""
    plain = _plain_end(text, start)
    if plain is not None:
        return plain
    n, i, depth = len(text), start, 0
    root: str | None = None
    while True:
        j = text.find("<", i)
        if j < 0:
            return n
        if j > start and _XML_DECL.match(text, j):
            return j
        skipped = _skip_markup(text, j)
        if skipped is not None:
            i = skipped
            continue
        m = _TAG.match(text, j)
        if m is None:  # a '<' that starts no tag: text (the parser will say what is wrong)
            i = j + 1
            continue
        closing, name = m.group(1) == "/", m.group(2)
        if closing:
            depth -= 1
            if depth <= 0 or name == root:
                return m.end()
        elif depth > 0 and name == ROOT:  # the previous operation never ended
            return j
        elif m.group(0).endswith("/>"):
            if depth == 0:
                return m.end()
        else:
            root = root or name
            depth += 1
        i = m.end()


def _skip_markup(text: str, j: int) -> int | None:
    """End of the comment, CDATA section, processing instruction or DOCTYPE at ``j``, else None."""
    for opener, closer in _SKIP:
        if text.startswith(opener, j):
            end = text.find(closer, j + len(opener))
            return len(text) if end < 0 else end + len(closer)
    if text.startswith("<!", j):
        return _declaration_end(text, j)
    return None


def _declaration_end(text: str, j: int) -> int:
    """End of ``<!DOCTYPE ... [ ... ]>`` (quotes and the internal subset's brackets respected)."""
    quote, brackets = "", 0
    for k in range(j + 2, len(text)):
        ch = text[k]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            brackets += 1
        elif ch == "]":
            brackets -= 1
        elif ch == ">" and brackets <= 0:
            return k + 1
    return len(text)


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_TO_ESCAPE = re.compile(r"[\\\n\r\udc80-\udcff]")
_ESCAPED = re.compile(r"\\(\\|n|r|x[0-9a-f]{2})")


_UNDECODED = re.compile("[\udc80-\udcff]")


def escape_record(text: str) -> str:
    """One document as one line: ``\\``, newline, CR escaped; an undecodable byte as ``\\xHH``."""
    if not _UNDECODED.search(text):  # the usual case, without a callback per character
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

    def one(m: re.Match[str]) -> str:
        ch = m.group(0)
        return _ESCAPES.get(ch) or f"\\x{ord(ch) - 0xDC00:02x}"

    return _TO_ESCAPE.sub(one, text)


def unescape_record(line: str) -> tuple[str, list[int]]:
    """The document a staged line holds, and the bytes its encoding could not decode."""
    if "\\x" not in line:  # no undecodable byte: plain replacements between escaped backslashes
        return "\\".join(p.replace("\\n", "\n").replace("\\r", "\r") for p in line.split("\\\\")), []
    bad: list[int] = []

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code.startswith("x"):
            bad.append(int(code[1:], 16))
            return "\ufffd"
        return {"\\": "\\", "n": "\n", "r": "\r"}[code]

    return _ESCAPED.sub(one, line), bad


def file_encoding(head: bytes, default: str) -> str:
    """The encoding the file's first prolog declares, else ``default``."""
    m = _DECLARED_ENCODING.match(head)
    if m:
        try:
            return codecs.lookup(m.group(1).decode("ascii")).name
        except LookupError:
            pass
    return default


def _operations(path: str, *, encoding: str) -> Iterator[tuple[int, str]]:
    data = Path(path).read_bytes()
    text = data.decode(file_encoding(data[:1024], encoding), errors="surrogateescape")
    for line, doc in split_operations(text.removeprefix("\ufeff")):
        yield line, escape_record(doc)


def operations(encoding: str) -> Splitter:
    """The XML documents of a file (:func:`split_operations`), each escaped onto one line
    (:func:`escape_record`); the file decoded with the encoding its first prolog declares, else
    ``encoding``."""
    return Splitter(f"ogg-xml:{encoding}", functools.partial(_operations, encoding=encoding), ".xml-records")


def stage_operations(path: str, staging: str, encoding: str) -> str:
    """Write the documents of ``path`` one per line; return the staged file's path.

    A sidecar ``<staged>.lines.json`` holds each staged line's original line number (the format
    :func:`lakecdc.decode.files.reread.locate` reads).
    """
    return stage(path, staging, operations(encoding))


# -- parsing one document (runs in Spark's Python workers) --------------------------------------

class Parsed(NamedTuple):
    """One operation as the executor reads it; validated afterwards by Spark expressions."""

    table: str | None = None
    type: str | None = None
    ts: str | None = None
    pos: str | None = None
    before: Pairs | None = None
    after: Pairs | None = None
    source: Pairs | None = None
    error: str | None = None


def parse_record(line: str, encoding: str) -> Parsed:
    """Parse one staged line into a :class:`Parsed` (``error`` set when it is bad)."""
    import defusedxml
    import defusedxml.ElementTree as safe_xml

    text, bad_bytes = unescape_record(line)
    if bad_bytes:
        shown = ", ".join(f"0x{b:02x}" for b in bad_bytes[:5])
        return Parsed(error=f"undecodable byte(s) {shown} (shown as \\xHH in the raw text): the file is not in "
                            f"its declared encoding (the prolog's, else option encoding={encoding})")
    try:
        if "<!DOCTYPE" in text or "<!ENTITY" in text:
            root = safe_xml.fromstring(text, forbid_dtd=True, forbid_entities=True, forbid_external=True)
        else:  # without a DTD nothing can be declared or expanded: the C parser is safe and 2x faster
            root = ElementTree.fromstring(text)
    except defusedxml.DefusedXmlException as exc:
        return Parsed(error=f"XML DOCTYPE/entities are not allowed: {exc}; GoldenGate never writes them, and "
                            "nothing they declare or reference was read or expanded")
    except safe_xml.ParseError as exc:
        return Parsed(error=f"not well-formed XML: {exc} (counted from the record's first line)")
    attrs = root.attrib
    if root.tag != ROOT:
        return Parsed(error=f"root element <{root.tag}> is not <{ROOT}>")
    try:
        before, after = _images(root)
        source = _source(root)
    except RecordError as exc:
        return Parsed(table=attrs.get("table"), error=str(exc))
    return Parsed(attrs.get("table"), attrs.get("type"), attrs.get("ts"), attrs.get("pos"),
                  before, after, source)


def _is_true(element: Element, attribute: str) -> bool:
    for name, value in element.attrib.items():
        if name.lower() == attribute.lower():
            return value.strip().lower() == "true"
    return False


def _value(col_name: str, element: Element | None) -> tuple[bool, str | None]:
    """(present, value) of one image element of a ``col``."""
    if element is None or _is_true(element, "missing"):
        return False, None
    if _is_true(element, "isNull"):
        return True, None
    if len(element):
        raise RecordError(f"col '{col_name}': <{element.tag}> holds element <{element[0].tag}>, expected text")
    return True, element.text or ""


def _images(root: Element) -> tuple[Pairs | None, Pairs | None]:
    """The before and after images (present columns only; None when none is present)."""
    before: Pairs = []
    after: Pairs = []
    seen: set[str] = set()
    for number, col in enumerate(root.findall("col"), start=1):
        name = col.get("name")
        if not name:
            raise RecordError(f"col #{number} has no 'name' attribute")
        if name in seen:
            raise RecordError(f"col '{name}' appears twice")
        seen.add(name)
        if col.find("missing") is not None:
            continue
        for image, tag in ((before, "before"), (after, "after")):
            present, value = _value(name, col.find(tag))
            if present:
                image.append((name, value))
    return before or None, after or None


def _source(root: Element) -> Pairs:
    """``current_ts``, ``numCols`` and ``token.<Name>`` entries."""
    out: Pairs = [(k, root.get(k)) for k in ("current_ts", "numCols") if root.get(k) is not None]
    for number, token in enumerate(root.iterfind("tokens/token"), start=1):
        name = token.findtext("Name")
        if not name:
            raise RecordError(f"token #{number} has no <Name>")
        out.append((f"token.{name}", token.findtext("Value")))
    return out


def _parse_or_report(line: str, encoding: str) -> Parsed:
    """:func:`parse_record`, with any unforeseen failure reported on the record, not the batch."""
    try:
        return parse_record(line, encoding)
    except Exception as exc:  # one odd record must not fail the whole batch
        return Parsed(error=f"could not read the operation: {type(exc).__name__}: {exc}")


def parse_batches(batches: Iterator[pa.RecordBatch], *, encoding: str, ops: Mapping[str, str]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: staged lines (``value`` + origin columns) to parsed operations
    (:data:`PARSED_SCHEMA`); ``ops``: ``type`` text -> canonical op."""
    for batch in batches:
        parsed = [_parse_or_report(v, encoding) for v in batch.column("value").to_pylist()]
        n = len(parsed)
        columns: list[Sequence[Any]] = list(zip(*parsed, strict=True)) if parsed else [[] for _ in Parsed._fields]
        table, kind, ts, pos, before, after, source, error = columns
        text, none = pa.string(), pa.nulls(n, pa.string())
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("_file"), batch.column("_block"), batch.column("_row"),
                pa.array(table, text), pa.array([None if k is None else ops.get(k) for k in kind], text),
                pa.nulls(n, pa.int64()), pa.array(pos, text), none, none, pa.nulls(n, pa.list_(text)),
                pa.array(before, _MAP), pa.array(after, _MAP), pa.array(source, _MAP), pa.array(error, text),
                pa.array(kind, text), pa.array(ts, text),
            ],
            names=PARSED_SCHEMA.fieldNames(),
        )


# -- the decoder --------------------------------------------------------------------------------


class OggXmlDecoder(Decoder):
    """GoldenGate XML operation documents to canonical change events."""

    spec = OGG_XML
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        try:
            self.encoding = codecs.lookup(self.options["encoding"]).name
        except LookupError:
            raise ConfigError(f"ogg-xml: encoding {self.options['encoding']!r} is not known; "
                              f"use a name such as UTF-8 or ISO-8859-1") from None
        self.ops = self.spec.op_table(self.options)

    def stage(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> list[str]:
        """Each input split into one document per line (see :func:`stage_operations`), by the
        executors, one task per file."""
        return on_executors(spark, functools.partial(stage_operations, staging=staging, encoding=self.encoding), files)

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Staged documents parsed in the executors (:data:`PARSED_SCHEMA`), with ``ts`` parsed
        (``_op_ts``)."""
        lines = read_lines(ctx.spark, self.stage(ctx.spark, inputs, staging=ctx.staging))
        body = functools.partial(parse_batches, encoding=self.options["encoding"], ops=dict(self.ops.ops))
        parsed = lines.mapInArrow(body, PARSED_SCHEMA)
        return parsed.select("*", parse_op_ts(F.col("x_op_ts_text"), utc_session=ctx.utc).alias("_op_ts"))

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        op, op_text, op_ts = F.col("x_op"), F.col("x_op_text"), F.col("_op_ts")
        names = self.spec.names
        checks = [
            (F.coalesce(F.trim("x_table"), F.lit("")) == "", "'table' attribute missing or empty"),
            (op_text.isNull(), "'type' attribute missing"),
            unknown_op(op_text, op.isNotNull(), self.ops, names.op),
            (op_ts.isNull(), F.format_string("'ts' attribute missing or not a timestamp: '%s'",
                                             F.coalesce("x_op_ts_text", F.lit("")))),
        ]
        for op_value, image in (("I", "after"), ("U", "after"), ("D", "before")):
            checks.append(((op == op_value) & F.col(f"x_{image}").isNull(), F.format_string(
                f"no col has a <{image}> value for type '%s' (every column is missing)", op_text)))
        return rows_parts(parsed, op_ts=op_ts, ordered=F.lit(False), checks=checks)


__all__ = [
    "OGG_XML", "PARSED_SCHEMA", "OggXmlDecoder", "Parsed", "escape_record", "operations", "parse_batches",
    "parse_record", "split_operations", "stage_operations", "unescape_record",
]
